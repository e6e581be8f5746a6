/* A stand-in for Windows' bcryptprimitives.dll under Wine, for tests only (never shipped).
 *
 * Rust's standard library takes its random bytes from `ProcessPrng` in bcryptprimitives.dll,
 * which Windows 10 and later have and Debian's Wine 8 lacks, so a Rust program built for
 * Windows does not start there. This DLL, put beside the test binaries, exports
 * `ProcessPrng` over `RtlGenRandom` (advapi32's `SystemFunction036`), which Wine has. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

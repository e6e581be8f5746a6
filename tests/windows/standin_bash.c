/* A stand-in for Git for Windows' bash.exe, for the Wine smoke suite only (never shipped).
 *
 * Git for Windows does not run under Wine here, so the suite points mekara at this program
 * through CLAUDE_CODE_GIT_BASH_PATH, the setting a real install would use. It takes what
 * mekara gives a shell, `-c COMMAND`, and hands COMMAND to `cmd.exe /C`, so the suite's shell
 * steps are written in words both shells read (`echo`, `exit N`). What it proves: mekara
 * finds the configured shell, runs it in a Job, reads its output and exit code, and kills
 * it; not that bash's own syntax works on Windows. */
#include <process.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[1], "-c") != 0) {
        fprintf(stderr, "stand-in bash: expected `-c COMMAND`\n");
        return 2;
    }
    fflush(stdout);
    return (int)_spawnlp(_P_WAIT, "cmd.exe", "cmd.exe", "/C", argv[2], NULL);
}

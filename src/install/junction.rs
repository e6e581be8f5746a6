//! A junction, where Windows refuses `mekara install` a symbolic link to a folder: Windows
//! lets a user make symbolic links only in Developer Mode or as an administrator, and says
//! `ERROR_PRIVILEGE_NOT_HELD` to anyone else, but lets anyone make a junction (a folder's
//! mount point), which reads the same for the clients: the link's files are the target's.
//!
//! A junction is an empty folder with a reparse point whose data names the target by its
//! absolute path ([`mount_point_data`]); it cannot point at another machine's folder, and
//! it does not follow the project when the project moves (a symbolic link's relative target
//! does): install made it, uninstall removes it.
#![cfg_attr(windows, allow(unsafe_code))] // `DeviceIoControl`; the call says why it is sound.

/// `IO_REPARSE_TAG_MOUNT_POINT`: the reparse tag of a junction.
const MOUNT_POINT: u32 = 0xA000_0003;

/// The most reparse data a file may have (`MAXIMUM_REPARSE_DATA_BUFFER_SIZE`).
const MOST: usize = 16 * 1024;

/// The reparse data of a junction to `target` (an absolute path in UTF-16, without its NUL):
/// a `REPARSE_DATA_BUFFER` of the mount point kind. Its header (the tag, the length of what
/// follows it, a reserved word) is followed by the offsets and lengths in bytes of the
/// substitute name (`\??\` and the path: the kernel's name) and of the print name (the
/// path, as a person reads it), then the two names, each ending in a NUL. `None` if that
/// is longer than a reparse point can hold.
pub(super) fn mount_point_data(target: &[u16]) -> Option<Vec<u8>> {
    // A path the system gave in its long form (`\\?\C:\...`) is named by the drive's path.
    let target = match target.strip_prefix(&wide(r"\\?\")[..]) {
        Some(rest) => rest,
        None => target,
    };
    let substitute: Vec<u16> = wide(r"\??\")
        .into_iter()
        .chain(target.iter().copied())
        .collect();
    let bytes = |units: &[u16]| u16::try_from(units.len() * 2).ok();
    let (substitute_len, print_len) = (bytes(&substitute)?, bytes(target)?);
    // The four words of offsets and lengths, and the two names with their NULs.
    let rest = 8 + usize::from(substitute_len) + 2 + usize::from(print_len) + 2;
    if 8 + rest > MOST {
        return None;
    }
    let mut data = Vec::with_capacity(8 + rest);
    data.extend_from_slice(&MOUNT_POINT.to_le_bytes());
    data.extend_from_slice(&u16::try_from(rest).ok()?.to_le_bytes());
    data.extend_from_slice(&0u16.to_le_bytes());
    for word in [0, substitute_len, substitute_len + 2, print_len] {
        data.extend_from_slice(&word.to_le_bytes());
    }
    for unit in substitute.iter().chain([&0]).chain(target).chain([&0]) {
        data.extend_from_slice(&unit.to_le_bytes());
    }
    Some(data)
}

fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
}

/// Makes `link` a junction to the folder `target` (relative to `link`'s folder, or
/// absolute). `link` must not exist; it is removed again when the junction cannot be made.
#[cfg(windows)]
pub(super) fn make(target: &std::path::Path, link: &std::path::Path) -> std::io::Result<()> {
    use std::os::windows::ffi::OsStrExt as _;
    use std::os::windows::fs::OpenOptionsExt as _;
    use std::os::windows::io::AsRawHandle as _;
    use windows_sys::Win32::Storage::FileSystem::{
        FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    };
    use windows_sys::Win32::System::IO::DeviceIoControl;
    /// `FSCTL_SET_REPARSE_POINT`.
    const SET_REPARSE_POINT: u32 = 0x0009_00A4;

    let folder = link.parent().unwrap_or(std::path::Path::new("."));
    // Absolute, and with `..` resolved: the kernel reads the name as it is.
    let target = std::path::absolute(folder.join(target))?;
    let units: Vec<u16> = target.as_os_str().encode_wide().collect();
    let data = mount_point_data(&units).ok_or_else(|| {
        std::io::Error::other(format!("`{}` is too long for a junction", target.display()))
    })?;
    let size = u32::try_from(data.len()).map_err(std::io::Error::other)?;
    std::fs::create_dir(link)?;
    let made = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(link)
        .and_then(|folder| {
            let mut returned = 0u32;
            // SAFETY: a live handle (kept by `folder`), `size` bytes of input that outlive
            // the call, no output, a pointer to a local, and no overlapped I/O.
            let ok = unsafe {
                DeviceIoControl(
                    folder.as_raw_handle().cast(),
                    SET_REPARSE_POINT,
                    data.as_ptr().cast(),
                    size,
                    std::ptr::null_mut(),
                    0,
                    &raw mut returned,
                    std::ptr::null_mut(),
                )
            };
            if ok == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    if made.is_err() {
        let _ = std::fs::remove_dir(link);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_junctions_data_names_the_target_for_the_kernel_and_for_people() {
        let data = mount_point_data(&wide(r"\\?\C:\p\.mekara")).expect("fits");
        let word = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]);
        assert_eq!(
            u32::from_le_bytes([data[0], data[1], data[2], data[3]]),
            MOUNT_POINT
        );
        // `\??\C:\p\.mekara` is 16 units (32 bytes), `C:\p\.mekara` 12 (24 bytes).
        assert_eq!(
            [word(4), word(6), word(8), word(10), word(12), word(14)],
            [8 + 32 + 2 + 24 + 2, 0, 0, 32, 34, 24]
        );
        assert_eq!(data.len(), 8 + usize::from(word(4)));
        let names: Vec<u16> = data[16..]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let text = String::from_utf16(&names).expect("utf-16");
        assert_eq!(text, "\\??\\C:\\p\\.mekara\0C:\\p\\.mekara\0");
    }

    #[test]
    fn a_target_too_long_for_a_reparse_point_is_refused() {
        let long = wide(&format!(r"C:\{}", "a".repeat(5000)));
        assert_eq!(mount_point_data(&long), None);
        let longest = wide(&format!(r"C:\{}", "a".repeat(4000)));
        assert!(mount_point_data(&longest).is_some_and(|d| d.len() <= MOST));
        let past_u16 = vec![u16::from(b'a'); 40_000];
        assert_eq!(mount_point_data(&past_u16), None);
    }
}

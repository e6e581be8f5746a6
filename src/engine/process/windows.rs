//! Windows: a step's processes in a Job Object, start times from `GetProcessTimes`.
//!
//! A step's first process is spawned suspended, put in a Job named after its pid
//! (`Local\mekara-step-PID`), noted, and only then let run ([`resume`]), so everything it
//! starts is in the Job from its first instruction: the Job is the step's process group.
//! The Job is made with `KILL_ON_JOB_CLOSE`, so its processes die with the last handle to it,
//! which is mekara's: a mekara that is killed takes its step's processes with it, and a
//! resume that finds the Job by its name (a handle leaked to a process that outlived
//! mekara keeps it) terminates it.
//!
//! The note keeps the first process's pid as the group's number, so notes and journals read
//! the same as on Unix. A process "leads its own group": a live process with the noted pid
//! that started outside the noted window is another one that got the pid, exactly as on
//! Unix. The Job's name holds the pid alone, so a Job left with members after its first
//! process ended is found by that pid, and its members, started after the window, are ours.
//!
//! Every call to the system is here, behind safe functions: `unsafe` lives in this file
//! alone among the engine's.
#![allow(unsafe_code)] // The Win32 calls; each says why it is sound.

use std::ffi::c_void;
use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle, RawHandle};
use std::process::Child;

use windows_sys::Win32::Foundation::{
    ERROR_ALREADY_EXISTS, FILETIME, GetLastError, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_STANDARD_INFO, FileStandardInfo, GetFileInformationByHandleEx,
};
use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_OBJECT_LIMIT_PROCESS_MEMORY, JOBOBJECT_BASIC_PROCESS_ID_LIST,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOBOBJECTINFOCLASS, JobObjectBasicProcessIdList,
    JobObjectExtendedLimitInformation, OpenJobObjectW, QueryInformationJobObject,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, GetCurrentProcessId, GetExitCodeProcess, GetProcessTimes,
    OpenProcess, OpenThread, PROCESS_QUERY_LIMITED_INFORMATION, ResumeThread,
    THREAD_SUSPEND_RESUME,
};

use super::Process;

/// The backend's name, for the tests.
#[cfg(test)]
pub(super) fn name() -> &'static str {
    "windows"
}

/// The resident memory of `child`: its working set.
pub(crate) fn resident(child: &Child) -> Option<u64> {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = u32::try_from(std::mem::size_of::<PROCESS_MEMORY_COUNTERS>()).ok()?;
    // SAFETY: the child's live handle (kept by `child`) and a pointer to a local of the size
    // given.
    let ok = unsafe {
        K32GetProcessMemoryInfo(child.as_raw_handle() as HANDLE, &raw mut counters, size)
    };
    (ok != 0).then(|| u64::try_from(counters.WorkingSetSize).unwrap_or(u64::MAX))
}

/// `JOB_OBJECT_TERMINATE | JOB_OBJECT_QUERY`: what a resume needs of a Job found by name.
const JOB_TERMINATE_AND_QUERY: u32 = 0x0008 | 0x0004;

/// What `GetExitCodeProcess` says of a process that has not ended.
const STILL_ACTIVE: u32 = 259;

/// The exit code of a Job's processes when mekara terminates it (as `kill -9` gives 137).
const KILLED: u32 = 137;

/// How far a creation time can be from the clock read around the spawn: the system time is
/// updated every tick of the timer (15.6 ms by default).
const SLACK_NS: u64 = 20_000_000;

/// Nanoseconds on the wall clock since the Unix epoch, which creation times are read on.
pub(crate) fn clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// An owned handle, or `None` for the null (or invalid) one a failed call returns.
fn owned(handle: HANDLE) -> Option<OwnedHandle> {
    if handle.is_null() || handle == INVALID_HANDLE_VALUE {
        return None;
    }
    // SAFETY: a handle a successful call just returned, owned by nobody else.
    Some(unsafe { OwnedHandle::from_raw_handle(handle as RawHandle) })
}

fn raw(handle: &OwnedHandle) -> HANDLE {
    handle.as_raw_handle() as HANDLE
}

/// `Local\mekara-step-PID`, NUL-terminated UTF-16.
fn job_name(pid: i32) -> Vec<u16> {
    format!("Local\\mekara-step-{pid}\0")
        .encode_utf16()
        .collect()
}

/// A FILETIME (100 ns since 1601) in nanoseconds since the Unix epoch.
fn unix_ns(time: FILETIME) -> u64 {
    const FROM_1601_TO_1970: u64 = 116_444_736_000_000_000;
    let ticks = (u64::from(time.dwHighDateTime) << 32) | u64::from(time.dwLowDateTime);
    ticks.saturating_sub(FROM_1601_TO_1970).saturating_mul(100)
}

/// Process `pid`'s start time; `None` if there is no such live process. Its group is its own
/// pid (see the module's header).
pub(crate) fn process(pid: i32) -> Option<Process> {
    let id = u32::try_from(pid).ok().filter(|&id| id != 0)?;
    // SAFETY: no pointers; a null handle is a failure, checked by `owned`.
    let handle = owned(unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, id) })?;
    let mut code = 0u32;
    // SAFETY: a live handle and a pointer to a local.
    if unsafe { GetExitCodeProcess(raw(&handle), &raw mut code) } == 0 || code != STILL_ACTIVE {
        return None;
    }
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a live handle and four pointers to locals.
    let ok = unsafe {
        GetProcessTimes(
            raw(&handle),
            &raw mut created,
            &raw mut exited,
            &raw mut kernel,
            &raw mut user,
        )
    };
    if ok == 0 {
        return None;
    }
    let at = unix_ns(created);
    Some(Process {
        pid,
        pgid: pid,
        started_ns: at.saturating_sub(SLACK_NS),
        started_by_ns: at.saturating_add(SLACK_NS),
    })
}

/// The live processes in the Job of the step whose first process was `pgid`.
pub(crate) fn group_members(pgid: i32) -> Vec<Process> {
    Job::open(pgid).map_or_else(Vec::new, |job| {
        job.process_ids()
            .into_iter()
            .filter_map(|id| process(i32::try_from(id).ok()?))
            .collect()
    })
}

/// Terminates the Job of the step whose first process was `pgid`; false if there is none.
pub(crate) fn kill_group(pgid: i32) -> bool {
    Job::open(pgid).is_some_and(|job| job.terminate())
}

/// mekara's own "group" and process id: both its pid, which no note may name.
pub(crate) fn own_group_and_pid() -> (i32, i32) {
    // SAFETY: no arguments.
    let me = i32::try_from(unsafe { GetCurrentProcessId() }).unwrap_or(i32::MAX);
    (me, me)
}

/// A Job Object: a step's processes.
#[derive(Debug)]
pub(crate) struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A Job for the step whose first process is `pid`, named after it so that a resume finds
    /// it, whose processes die when mekara lets go of it. A name already taken (a Job of
    /// another step whose first process had this pid and ended, with members left) is not
    /// joined: the Job is then unnamed, which a resume cannot find, but which still dies with
    /// mekara.
    pub(crate) fn for_step(pid: u32) -> std::io::Result<Job> {
        let name = job_name(i32::try_from(pid).unwrap_or(i32::MAX));
        // SAFETY: a NUL-terminated name that outlives the call; no security attributes.
        let named = owned(unsafe { CreateJobObjectW(std::ptr::null(), name.as_ptr()) })
            .ok_or_else(std::io::Error::last_os_error)?;
        // SAFETY: no arguments; read right after the call it is about.
        let job = if unsafe { GetLastError() } == ERROR_ALREADY_EXISTS {
            tracing::warn!(
                "a Job of an earlier step is still named after process {pid}; this step's Job has no name, so a resume cannot find it"
            );
            drop(named);
            Job::unnamed()?
        } else {
            Job { handle: named }
        };
        job.set_limits(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, 0)?;
        Ok(job)
    }

    /// An unnamed Job holding an evaluator child (`mekara __evaluate`) to `memory_bytes` of
    /// committed memory (`PROCESS_MEMORY`: an allocation past it fails in the child), and
    /// ending it when mekara lets go of the Job, or dies however it dies (`KILL_ON_JOB_CLOSE`).
    pub(crate) fn for_evaluator(child: &Child, memory_bytes: usize) -> std::io::Result<Job> {
        let job = Job::unnamed()?;
        job.set_limits(
            JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_PROCESS_MEMORY,
            memory_bytes,
        )?;
        job.assign(child)?;
        Ok(job)
    }

    fn unnamed() -> std::io::Result<Job> {
        // SAFETY: no name and no security attributes.
        let handle = owned(unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) })
            .ok_or_else(std::io::Error::last_os_error)?;
        Ok(Job { handle })
    }

    /// The Job of the step whose first process was `pgid`, if it is still there.
    fn open(pgid: i32) -> Option<Job> {
        let name = job_name(pgid);
        // SAFETY: a NUL-terminated name that outlives the call.
        let handle = owned(unsafe { OpenJobObjectW(JOB_TERMINATE_AND_QUERY, 0, name.as_ptr()) })?;
        Some(Job { handle })
    }

    /// Sets the Job's limits: `flags` (`JOB_OBJECT_LIMIT_*`), and the committed memory each
    /// of its processes may have when `flags` holds `PROCESS_MEMORY`.
    fn set_limits(&self, flags: u32, process_memory: usize) -> std::io::Result<()> {
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = flags;
        info.ProcessMemoryLimit = process_memory;
        let size = u32::try_from(std::mem::size_of_val(&info)).unwrap_or(u32::MAX);
        // SAFETY: a live handle, and the struct this class takes, with its size.
        let ok = unsafe {
            SetInformationJobObject(
                raw(&self.handle),
                JobObjectExtendedLimitInformation,
                (&raw const info).cast::<c_void>(),
                size,
            )
        };
        if ok == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Fills `info` with what the system says of the Job for `class`; false if it refused.
    ///
    /// # Safety
    ///
    /// `T` must be the plain C struct that `class` fills, or one that starts with it and
    /// that any bytes are a valid value of.
    unsafe fn query<T>(&self, class: JOBOBJECTINFOCLASS, info: &mut T) -> bool {
        let size = u32::try_from(std::mem::size_of::<T>()).unwrap_or(u32::MAX);
        // SAFETY: a live handle, and a buffer of `size` bytes that the caller says is fit
        // for `class`.
        unsafe {
            QueryInformationJobObject(
                raw(&self.handle),
                class,
                std::ptr::from_mut(info).cast::<c_void>(),
                size,
                std::ptr::null_mut(),
            ) != 0
        }
    }

    /// The Job's limit flags and per-process memory limit, as the system reads them back.
    #[cfg(test)]
    fn limits(&self) -> std::io::Result<(u32, usize)> {
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the struct this class fills.
        if !unsafe { self.query(JobObjectExtendedLimitInformation, &mut info) } {
            return Err(std::io::Error::last_os_error());
        }
        Ok((
            info.BasicLimitInformation.LimitFlags,
            info.ProcessMemoryLimit,
        ))
    }

    /// Puts `child` (and so all it starts from then on) in the Job.
    pub(crate) fn assign(&self, child: &Child) -> std::io::Result<()> {
        // SAFETY: two live handles (the child's is kept by `child`).
        let ok =
            unsafe { AssignProcessToJobObject(raw(&self.handle), child.as_raw_handle() as HANDLE) };
        if ok == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Kills every process in the Job; false if the system refused.
    pub(crate) fn terminate(&self) -> bool {
        // SAFETY: a live handle.
        unsafe { TerminateJobObject(raw(&self.handle), KILLED) != 0 }
    }

    /// The ids of the processes in the Job now (at most a thousand are read: a step's Job
    /// with more is killed whole all the same).
    pub(crate) fn process_ids(&self) -> Vec<usize> {
        /// The list's header and room for a thousand ids.
        #[repr(C)]
        struct List {
            head: JOBOBJECT_BASIC_PROCESS_ID_LIST,
            more: [usize; 1023],
        }
        // SAFETY: all-zero is a valid value of these plain C structs.
        let mut list: List = unsafe { std::mem::zeroed() };
        // SAFETY: a buffer that starts with the struct this class fills (its id array runs
        // on into `more`), of plain integers.
        if !unsafe { self.query(JobObjectBasicProcessIdList, &mut list) } {
            return Vec::new();
        }
        let count = usize::try_from(list.head.NumberOfProcessIdsInList)
            .unwrap_or(0)
            .min(1024);
        std::iter::once(list.head.ProcessIdList[0])
            .chain(list.more)
            .take(count)
            .collect()
    }
}

/// Lets a child spawned with `CREATE_SUSPENDED` run: resumes the threads of its process (a
/// new process has one).
pub(crate) fn resume(child: &Child) -> std::io::Result<()> {
    // SAFETY: no pointers.
    let snapshot = owned(unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) })
        .ok_or_else(std::io::Error::last_os_error)?;
    // SAFETY: all-zero is a valid value of this plain C struct; its size is set below.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = u32::try_from(std::mem::size_of::<THREADENTRY32>()).unwrap_or(0);
    let mut resumed = 0;
    // SAFETY: a live snapshot and a pointer to a local whose size is set.
    let mut more = unsafe { Thread32First(raw(&snapshot), &raw mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == child.id() {
            // SAFETY: no pointers; a null handle is a failure, checked by `owned`.
            if let Some(thread) =
                owned(unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) })
            {
                // SAFETY: a live thread handle.
                if unsafe { ResumeThread(raw(&thread)) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for `Thread32First`.
        more = unsafe { Thread32Next(raw(&snapshot), &raw mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(std::io::Error::other(format!(
            "cannot resume process {}: no thread of it was found",
            child.id()
        )));
    }
    Ok(())
}

/// Spawns `command` in a console process group of its own: the console's Ctrl-C then
/// reaches mekara alone, which stops what the process is doing.
pub(crate) fn in_own_group(command: &mut std::process::Command) {
    std::os::windows::process::CommandExt::creation_flags(command, CREATE_NEW_PROCESS_GROUP);
}

/// A child that [`interrupt`] can reach: in a console process group of its own, which a
/// Ctrl-Break is sent to.
pub(crate) fn interruptible(command: &mut std::process::Command) {
    in_own_group(command);
}

/// Asks a child `mekara` to stop as Ctrl-C does: a Ctrl-Break to its console process group
/// (a Ctrl-C cannot be sent to one group alone).
pub(crate) fn interrupt(child: &Child) {
    // SAFETY: no pointers.
    let _ = unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, child.id()) };
}

/// Whether `file` was removed while open (it is pending deletion: its name goes when its
/// last handle closes).
pub(crate) fn delete_pending(file: &std::fs::File) -> bool {
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: FILE_STANDARD_INFO = unsafe { std::mem::zeroed() };
    let size = u32::try_from(std::mem::size_of_val(&info)).unwrap_or(u32::MAX);
    // SAFETY: a live handle (kept by `file`), and the struct this class fills, with its size.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            file.as_raw_handle() as HANDLE,
            FileStandardInfo,
            (&raw mut info).cast::<c_void>(),
            size,
        )
    };
    ok != 0 && (info.DeletePending || info.NumberOfLinks == 0)
}

/// Reads and writes at an offset (the file's position moves, which nothing here uses).
pub(crate) trait FileAt {
    /// Reads what there is at `offset`, at most `buf.len()` bytes.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
}

impl FileAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match std::os::windows::fs::FileExt::seek_read(self, buf, offset) {
            // Reading past the end is an error on Windows, and an empty read on Unix.
            Err(e) if e.raw_os_error() == Some(38) => Ok(0),
            read => read,
        }
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_write(self, buf, offset)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::windows::process::CommandExt as _;

    use super::*;

    /// A `cmd` that waits about `seconds` (`ping` to the loopback, the usual stand-in for
    /// `sleep`, which `cmd` lacks).
    fn waiting(seconds: u32) -> std::process::Command {
        let mut command = std::process::Command::new("cmd");
        command.args(["/C", &format!("ping -n {seconds} 127.0.0.1 >NUL")]);
        command
    }

    #[test]
    fn a_steps_job_is_found_by_name_and_killed_whole() {
        let mut child = waiting(60)
            .creation_flags(windows_sys::Win32::System::Threading::CREATE_SUSPENDED)
            .spawn()
            .expect("spawn cmd");
        let job = Job::for_step(child.id()).expect("job");
        job.assign(&child).expect("assign");
        resume(&child).expect("resume");
        let pgid = i32::try_from(child.id()).expect("pid fits");
        // `cmd` starts `ping` inside the Job.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while group_members(pgid).len() < 2 {
            assert!(std::time::Instant::now() < deadline, "ping never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let leader = process(pgid).expect("the leader is alive");
        assert_eq!(leader.pgid, pgid);
        assert!(kill_group(pgid), "the Job was found by its name");
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(137));
        drop(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !group_members(pgid).is_empty() {
            assert!(std::time::Instant::now() < deadline, "members left");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_jobs_processes_die_when_its_handle_closes() {
        let started = std::time::Instant::now();
        let mut child = waiting(60).spawn().expect("spawn cmd");
        let job = Job::for_step(child.id()).expect("job");
        job.assign(&child).expect("assign");
        drop(job);
        child.wait().expect("wait");
        // Killed, not ended by its minute of pings (the exit code of a Job closed this way is
        // the system's choice).
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "it ran on after the Job's last handle closed"
        );
    }

    /// Whether the tests run under Wine (`tests/windows/wine-run` sets its prefix, and
    /// Wine hands the Unix environment on).
    fn under_wine() -> bool {
        std::env::var_os("WINEPREFIX").is_some()
    }

    #[test]
    fn an_evaluators_job_limits_its_memory_and_ends_it_with_the_job() {
        let started = std::time::Instant::now();
        let mut child = waiting(60).spawn().expect("spawn cmd");
        let job = Job::for_evaluator(&child, 300 << 20).expect("job");
        let (flags, memory) = job.limits().expect("query");
        if under_wine() && flags == 0 {
            // Wine 8 takes the limits and reads back zeros; it does not enforce the
            // memory limit either (docs/install.md).
            eprintln!("Wine reads a Job's limits back as zeros: only the kill on close is tested");
        } else {
            assert_eq!(
                (flags, memory),
                (
                    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_PROCESS_MEMORY,
                    300 << 20
                )
            );
        }
        drop(job);
        child.wait().expect("wait");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "it ran on after its Job's last handle closed"
        );
    }

    /// Set for [`holds_an_evaluator_until_killed`] when a test runs it as a process of its own.
    const HOLDER: &str = "MEKARA_TEST_EVALUATOR_HOLDER";

    /// Not a test: the stand-in for a server, run by
    /// [`an_evaluator_child_ends_when_its_parent_is_killed`]. It holds a child as mekara holds
    /// an evaluator, says its pid, and waits to be killed.
    #[test]
    #[ignore = "run as a process of its own by another test"]
    fn holds_an_evaluator_until_killed() {
        if std::env::var_os(HOLDER).is_none() {
            return;
        }
        // stdin not a pipe of this process's: only the Job can end the child with it.
        let mut child = waiting(60)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn cmd");
        let _limit = super::super::EvaluatorLimit::hold(&child, 300 << 20);
        println!("holding {}", child.id());
        std::thread::sleep(std::time::Duration::from_secs(60));
        // Not reached when the test kills this process.
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn an_evaluator_child_ends_when_its_parent_is_killed() {
        use std::io::BufRead as _;
        let mut server = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--ignored",
                "--exact",
                "engine::process::imp::tests::holds_an_evaluator_until_killed",
                "--nocapture",
            ])
            .env(HOLDER, "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the holder");
        let out = std::io::BufReader::new(server.stdout.take().expect("stdout"));
        let pid: i32 = out
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("holding ")?.trim().parse().ok())
            .expect("the holder says its child's pid");
        assert!(process(pid).is_some(), "the child runs");
        server.kill().expect("kill the holder");
        server.wait().expect("wait");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while process(pid).is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the child outlived its killed parent"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn our_own_process_is_read_and_a_missing_one_is_none() {
        let (group, me) = own_group_and_pid();
        assert_eq!(group, me);
        let found = process(me).expect("our own process");
        assert!(found.started_ns <= clock_ns());
        assert_eq!(process(i32::MAX), None);
        assert_eq!(process(0), None);
        assert_eq!(process(-3), None);
        assert!(group_members(me).is_empty(), "mekara is in no step's Job");
    }

    #[test]
    fn reads_and_writes_at_an_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("note"))
            .expect("open");
        file.write_all_at(b"abc", 4).expect("write");
        let mut buf = [0u8; 8];
        assert_eq!(file.read_at(&mut buf, 4).expect("read"), 3);
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(file.read_at(&mut buf, 100).expect("read past the end"), 0);
    }
}

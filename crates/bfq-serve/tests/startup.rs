//! What a start checks before it makes anything, what it leaves behind when it fails (nothing it
//! did not find), whose Unix socket it may replace (a stale one only), and how a stop ends
//! connections that would otherwise keep it alive: one still negotiating, one in the middle of a
//! write's payload, one that keeps sending or never reads its replies.
//!
//! Small files in a directory of each test's own under /var/tmp, removed at the end.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bfq_serve::{check, start, Config, ServeError};

mod common;

/// A directory of the test's own, removed at the end (also when the test fails).
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = PathBuf::from(format!("/var/tmp/bfq-serve-startup-{tag}-{}", std::process::id()));
        // Ours only if this process makes it.
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e} (not touched)", dir.display()));
        Dir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A file of `len` bytes of data.
    fn file(&self, name: &str, len: usize) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, vec![0x5au8; len]).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(text: &str) -> Config {
    Config::from_toml(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// A configuration listening on `listen` (TOML list items) with one export `a` on `path`, and
/// `extra` lines in the export.
fn one_export(listen: &str, path: &Path, extra: &str) -> String {
    format!(
        "listen = [{listen}]\nsummary_interval = \"off\"\n[[export]]\nname = \"a\"\npath = \"{}\"\n{extra}\n",
        path.display()
    )
}

fn inode(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Whether a server answers on the Unix socket (its greeting).
fn answers(socket: &Path) -> bool {
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(socket) else { return false };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).is_ok() && &hello[..8] == b"NBDMAGIC"
}

#[test]
fn a_unix_socket_in_use_is_refused_and_left_alone_and_only_a_stale_one_is_replaced() {
    let dir = Dir::new("sockets");
    let (image, socket) = (dir.file("a.img", 1 << 20), dir.path("s.sock"));
    let listen = format!("\"unix:{}\"", socket.display());
    let first = start(config(&one_export(&listen, &image, ""))).unwrap();
    let ours = inode(&socket);
    // A second server on the same socket, with an export it would create: refused before anything.
    let fresh = dir.path("fresh.img");
    let second = start(config(&one_export(&listen, &fresh, "size = \"1MiB\""))).err().expect("refused");
    assert!(matches!(second, ServeError::Socket { .. }), "{second}");
    assert_eq!(
        second.to_string(),
        format!("test.toml:1: field `listen`: unix socket {} is in use by another server", socket.display())
    );
    assert_eq!(inode(&socket), ours, "the running server's socket is untouched");
    assert!(!fresh.exists(), "the refused start created no file");
    assert!(answers(&socket), "the first server still answers on its socket");
    first.stop().unwrap();
    assert!(!socket.exists(), "a stop removes the socket it made");

    // A socket whose server is gone (nothing answers): replaced.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let replaced = start(config(&one_export(&listen, &image, ""))).unwrap();
    assert!(answers(&socket));
    // Another server took the path meanwhile: a stop leaves its socket alone.
    std::fs::remove_file(&socket).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let theirs = inode(&socket);
    replaced.stop().unwrap();
    assert_eq!(inode(&socket), theirs, "the other server's socket is still there");
    drop(other);

    // A file that is not a socket: never touched.
    std::fs::remove_file(&socket).unwrap();
    std::fs::write(&socket, b"not a socket").unwrap();
    let e = start(config(&one_export(&listen, &image, ""))).err().expect("refused");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&socket).unwrap(), b"not a socket");
}

#[test]
fn a_start_that_fails_removes_the_files_it_created_and_nothing_else() {
    let dir = Dir::new("undo");
    let (fresh, socket) = (dir.path("fresh.img"), dir.path("s.sock"));
    // The same socket twice (which a configuration file cannot say: put in by hand here) passes the
    // checks, and the second fails after the export's file and the first socket are made.
    let listen = format!("\"unix:{}\"", socket.display());
    let mut twice = config(&one_export(&listen, &fresh, "size = \"1MiB\""));
    twice.listen.push(twice.listen[0].clone());
    let e = start(twice).err().expect("fails");
    assert!(matches!(e, ServeError::Socket { .. }), "{e}");
    assert!(!fresh.exists(), "the export's file it created is removed");
    assert!(!socket.exists(), "the socket it made is removed");
    // A TCP address in use fails the start before anything is made.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = format!("\"unix:{}\", \"{}\"", socket.display(), taken.local_addr().unwrap());
    let e = start(config(&one_export(&listen, &fresh, "size = \"1MiB\""))).err().expect("fails");
    assert!(e.to_string().starts_with("test.toml:1: field `listen`: cannot listen on 127.0.0.1:"), "{e}");
    assert!(!fresh.exists() && !socket.exists());
    // An existing export file is never removed, whatever fails.
    let image = dir.file("a.img", 1 << 20);
    let e = start(config(&one_export(&listen, &image, ""))).err().expect("fails");
    assert!(matches!(e, ServeError::Listen { .. }), "{e}");
    assert_eq!(std::fs::read(&image).unwrap(), vec![0x5au8; 1 << 20]);
}

#[test]
fn check_finds_what_a_start_would_fail_on_and_makes_nothing() {
    let dir = Dir::new("check");
    let socket = dir.path("s.sock");
    let listen = format!("\"unix:{}\"", socket.display());
    let image = dir.file("a.img", 1 << 20);
    let failing = |text: String| -> String {
        let e = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        e.to_string()
    };
    let missing_dir = dir.path("no-such-dir/a.img");
    let e = failing(one_export(&listen, &missing_dir, "size = \"1MiB\""));
    assert!(e.contains("no-such-dir does not exist"), "{e}");
    let missing = dir.path("missing.img");
    let e = failing(one_export(&listen, &missing, "size = \"1MiB\"\nread_only = true"));
    assert!(e.contains("read-only export is not created"), "{e}");
    let e = failing(one_export(&listen, &missing, ""));
    assert!(e.contains("no `size`"), "{e}");
    let e = failing(one_export(&listen, &dir.0, ""));
    assert!(e.contains("is a directory"), "{e}");
    let e = failing(one_export(&listen, Path::new("/dev/null"), ""));
    assert!(e.contains("is a character device"), "{e}");
    for (name, len) in [("empty.img", 0), ("small.img", 100)] {
        let e = failing(one_export(&listen, &dir.file(name, len), ""));
        assert!(e.contains(&format!("has {len} bytes: less than one 4 KiB block")), "{e}");
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap();
    let e = failing(one_export(&format!("\"{port}\""), &image, ""));
    assert_eq!(e, format!("test.toml:1: field `listen`: cannot listen on {port}"));
    let e = failing(format!("metrics = \"{port}\"\n{}", one_export(&listen, &image, "")));
    assert_eq!(e, format!("test.toml:1: field `metrics`: cannot listen on {port}"));
    std::fs::write(&socket, b"x").unwrap();
    let e = failing(one_export(&listen, &image, ""));
    assert!(e.contains("is taken by a regular file, not a socket"), "{e}");
    std::fs::remove_file(&socket).unwrap();
    // A configuration a start can serve passes, and the check made nothing.
    check(&config(&one_export(&listen, &missing, "size = \"1MiB\""))).unwrap();
    assert!(!missing.exists() && !socket.exists());
}

/// A fuzzer's: an address that does not resolve, a port in use and a unix socket whose directory
/// is missing were said without the file, the line or the field (`cannot listen on ...: failed to
/// lookup address information`). Now each is the configuration's error on the address's own line,
/// from `check` as from a start, and the start makes nothing.
#[test]
fn an_address_that_cannot_be_listened_on_is_named_with_its_file_line_and_field() {
    let dir = Dir::new("addresses");
    let fresh = dir.path("fresh.img");
    // Each address on a line of its own: the error names the one at fault.
    let with = |listen: &str, top: &str| {
        format!(
            "{top}listen = [\n  \"127.0.0.1:0\",\n  {listen},\n]\n[[export]]\nname = \"a\"\npath = \"{}\"\nsize = \"1MiB\"\n",
            fresh.display()
        )
    };
    let both = |text: String| -> (String, String) {
        let checked = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        let started = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        (checked.to_string(), started.to_string())
    };
    // `a..b` cannot be a name: the resolver refuses it without asking a name server.
    let (checked, started) = both(with("\"a..b:0\"", ""));
    assert!(
        checked.starts_with("test.toml:3: field `listen`: \"a..b:0\" does not resolve to an address: "),
        "{checked}"
    );
    assert_eq!(started, checked);
    let (checked, started) = both(with("\"127.0.0.2:0\"", "metrics = \"a..b:9109\"\n"));
    assert!(
        checked.starts_with("test.toml:1: field `metrics`: \"a..b:9109\" does not resolve to an address: "),
        "{checked}"
    );
    assert_eq!(started, checked);
    let nowhere = dir.path("no-such-dir/s.sock");
    let (checked, started) = both(with(&format!("\"unix:{}\"", nowhere.display()), ""));
    assert_eq!(
        checked,
        format!(
            "test.toml:3: field `listen`: unix socket {} cannot be made: its directory {} does not exist",
            nowhere.display(),
            dir.path("no-such-dir").display()
        )
    );
    assert_eq!(started, checked);
    // A port in use: found by `check`'s bind as by the start's, with the OS's reason after it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap();
    let (checked, started) = both(with(&format!("\"{port}\""), ""));
    assert_eq!(checked, format!("test.toml:3: field `listen`: cannot listen on {port}"));
    assert_eq!(started, checked);
    let e = start(config(&with("\"127.0.0.2:0\"", &format!("metrics = \"{port}\"\n")))).err().expect("fails");
    assert_eq!(e.to_string(), format!("test.toml:1: field `metrics`: cannot listen on {port}"));
    let reason = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default();
    assert!(reason.contains("in use"), "{reason}");
    assert!(!fresh.exists() && !nowhere.exists(), "the refused starts made nothing");
}

/// A fuzzer's: a file to create with `size = "1000000TiB"` passed `check`, and the start failed
/// with "cannot size it: File too large" on the line of `path` (that size is now refused when the
/// file is read: the engine addresses 1 PiB of a file). On ext2/3/4, whose files hold at most
/// 2^32 - 1 blocks, `check` refuses 100 TiB on the line of `size`, as the start then does, and a
/// size just within passes (sparse: the free space is not asked). Elsewhere (another file system
/// under /var/tmp) the limit is not known to `check`, and the test says it is skipped.
#[test]
fn a_size_its_file_system_cannot_hold_is_refused_by_check_on_the_line_of_size() {
    let dir = Dir::new("size");
    let fresh = dir.path("big.img");
    let fs = rustix::fs::statfs(&dir.0).unwrap();
    #[allow(clippy::unnecessary_cast)]
    if fs.f_type as i64 != 0xEF53 || fs.f_bsize != 4096 {
        eprintln!("skipped: {} is not ext2/3/4 with 4 KiB blocks", dir.0.display());
        return;
    }
    // Line 7: `size`, two lines below `path`.
    let text = one_export("\"127.0.0.1:0\"", &fresh, "\nsize = \"100TiB\"");
    let expected = format!(
        "test.toml:7: field `size`: export `a` ({}): cannot be created 109951162777600 bytes \
         (100 TiB) long: the largest file its file system (ext2/ext3/ext4) can hold is \
         17592186040320 bytes (16.0 TiB)",
        fresh.display()
    );
    let e = check(&config(&text)).expect_err("check refuses it");
    assert_eq!(e.to_string(), expected);
    let e = start(config(&text)).err().expect("start refuses it");
    assert_eq!(e.to_string(), expected);
    check(&config(&one_export("\"127.0.0.1:0\"", &fresh, "size = 17592186040320"))).unwrap();
    assert!(!fresh.exists(), "neither check nor the refused start made the file");
}

/// Found beside the fuzzer's: 9,900 exports on one file system passed `check`, and the start failed
/// at the engine ("9900 targets: an engine drives 1..=4096") naming all 9,900 exports, after creating
/// their files. `check` and the start refuse the first export past the engine's targets (one each,
/// two with `cache = "read"`) on the line of its `path`, and the start makes nothing.
#[test]
fn exports_past_the_targets_of_one_engine_are_refused_from_the_first_that_does_not_fit() {
    let dir = Dir::new("targets");
    // 2,048 exports with cache = "read" take the engine's 4,096 targets; one more is one too many.
    let mut text = String::from("listen = [\"127.0.0.1:0\"]\n");
    for i in 0..2049 {
        let cache = if i < 2048 { "read" } else { "none" };
        text += &format!(
            "[[export]]\nname = \"e{i}\"\npath = \"{}\"\nsize = \"4KiB\"\ncache = \"{cache}\"\n",
            dir.path(&format!("e{i}.img")).display()
        );
    }
    // The last export's `path`: line 4 + 5 x 2048 (five lines an export after `listen`).
    let expected = format!(
        "test.toml:10244: export `e2048` ({}): needs 1 more target(s) of the I/O engine of its file's \
         device, which has 4096 of the 4096 an engine drives",
        dir.path("e2048.img").display()
    );
    let e = check(&config(&text)).expect_err("check refuses it").to_string();
    assert!(e.starts_with(&expected), "{e}");
    let e = start(config(&text)).err().expect("start refuses it").to_string();
    assert!(e.starts_with(&expected), "{e}");
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0, "the refused start made nothing");
}

/// An export's file error, from `--check` as from a start, begins with the configuration's file and
/// the line of that export's `path` (as the configuration's own errors do), then the export and its
/// path as before: with several exports, the line says which one to fix.
#[test]
fn an_exports_file_error_names_the_line_of_its_path_in_the_configuration() {
    let dir = Dir::new("line");
    let socket = dir.path("s.sock");
    let (good, small, missing) =
        (dir.file("good.img", 1 << 20), dir.file("small.img", 100), dir.path("no/b.img"));
    // Line 5: the first export's path; line 10: the second's (after an empty line 6 and one in b).
    let two = |second: &Path, extra: &str| {
        format!(
            "{}[[export]]\nname = \"b\"\n\npath = \"{}\"\n{extra}\n",
            one_export(&format!("\"unix:{}\"", socket.display()), &good, ""),
            second.display()
        )
    };
    for (path, extra, message) in [
        (&small, "", "has 100 bytes: less than one 4 KiB block to serve".to_string()),
        (&missing, "read_only = true", "does not exist, and a read-only export is not created".to_string()),
        (
            &missing,
            "size = \"1MiB\"",
            format!("cannot be created: its directory {} does not exist", dir.path("no").display()),
        ),
    ] {
        let expected = format!("test.toml:10: export `b` ({}): {message}", path.display());
        let text = two(path, extra);
        let e = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        assert_eq!(e.to_string(), expected);
        let e = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        assert_eq!(e.to_string(), expected);
    }
    assert!(!socket.exists() && !missing.exists(), "the refused starts made nothing");
    // The first export's file: its own line.
    let e = check(&config(&one_export("\"127.0.0.1:0\"", &small, ""))).expect_err("too small");
    assert!(e.to_string().starts_with(&format!("test.toml:5: export `a` ({}): ", small.display())), "{e}");
}

/// Installs the seccomp `filter` (classic BPF over `seccomp_data`) on the calling thread and the
/// threads it starts from then on: a filter binds the thread that installs it, not the rest of the
/// test binary.
fn seccomp_on_this_thread(filter: &mut [libc::sock_filter]) {
    let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
    // SAFETY: prctl with these options reads only `program`, which points at `filter`; both outlive
    // the calls (the kernel copies the filter).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0 as libc::c_ulong, 0, 0), 0);
        let mode = libc::SECCOMP_MODE_FILTER as libc::c_ulong;
        let r = libc::prctl(libc::PR_SET_SECCOMP, mode, &program as *const libc::sock_fprog);
        assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
    }
}

/// One instruction of a seccomp filter.
fn op(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt, jf, k }
}

/// Makes system call `nr` fail with `errno` ([`seccomp_on_this_thread`]). For numbers from 424 on
/// (the table every architecture shares), the filter needs no look at the architecture.
fn refuse_on_this_thread(nr: u32, errno: i32) {
    assert!(nr >= 424, "a number of the shared table");
    seccomp_on_this_thread(&mut [
        // The system call's number (`seccomp_data.nr`, at offset 0).
        op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, nr, 0, 1),
        op(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | errno as u32, 0, 0),
        op(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW, 0, 0),
    ]);
}

/// Makes `cachestat` (451) fail with ENOSYS, as on a kernel before 6.5.
fn without_cachestat_on_this_thread() {
    refuse_on_this_thread(451, libc::ENOSYS);
}

/// Makes an open of a file without a name (O_TMPFILE) fail with EOPNOTSUPP, as on a file system
/// without them ([`seccomp_on_this_thread`]); every other open goes through. Both system calls that
/// open: `openat` (the flags in `args[2]`) and, where there is one, `open` (in `args[1]`, which rustix
/// uses on x86-64).
fn without_o_tmpfile_on_this_thread() {
    // `seccomp_data.args[n]` is at offset 16 + 8n; its low half first on a little-endian machine.
    let arg = |n: u32| 16 + 8 * n + if cfg!(target_endian = "big") { 4 } else { 0 };
    #[cfg(target_arch = "x86_64")]
    let open = libc::SYS_open as u32;
    #[cfg(not(target_arch = "x86_64"))]
    let open = u32::MAX;
    let tmpfile = (libc::O_TMPFILE & !libc::O_DIRECTORY) as u32;
    let (ld, jeq, jset, ret) = (
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
        libc::BPF_RET | libc::BPF_K,
    );
    seccomp_on_this_thread(&mut [
        op(ld, 0, 0, 0),
        op(jeq, libc::SYS_openat as u32, 0, 2),
        op(ld, arg(2), 0, 0),
        op(libc::BPF_JMP | libc::BPF_JA, 2, 0, 0),
        op(jeq, open, 0, 3),
        op(ld, arg(1), 0, 0),
        op(jset, tmpfile, 0, 1),
        op(ret, libc::SECCOMP_RET_ERRNO | libc::EOPNOTSUPP as u32, 0, 0),
        op(ret, libc::SECCOMP_RET_ALLOW, 0, 0),
    ]);
}

/// `cache = "read"` needs `cachestat` (Linux 6.5): without it a start is refused, and `check` refuses
/// the configuration in the same words (it once passed it), for an existing file and for one a start
/// would create. With this kernel's own, `check` and a start agree.
#[test]
fn check_refuses_cache_read_without_cachestat_in_the_words_of_a_start() {
    let dir = Dir::new("cachestat");
    let (image, fresh) = (dir.file("a.img", 1 << 20), dir.path("fresh.img"));
    let cases = [
        (image.clone(), one_export("\"127.0.0.1:0\"", &image, "cache = \"read\"")),
        (fresh.clone(), one_export("\"127.0.0.1:0\"", &fresh, "cache = \"read\"\nsize = \"1MiB\"")),
    ];
    for (_, text) in &cases {
        let checked = check(&config(text));
        match start(config(text)) {
            Ok(server) => {
                server.stop().unwrap();
                assert!(checked.is_ok(), "a start passed, check did not: {}", checked.unwrap_err());
            }
            Err(e) => assert!(checked.is_err(), "check passed, a start did not: {e}"),
        }
    }
    let _ = std::fs::remove_file(&fresh);
    std::thread::spawn(move || {
        without_cachestat_on_this_thread();
        for (path, text) in &cases {
            let expected = format!(
                "test.toml:5: export `a` ({}): cache = \"read\": cannot ask which of its pages are cached \
                 (cachestat, Linux 6.5 or later): Function not implemented (os error 38)",
                path.display()
            );
            let checked = check(&config(text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
            assert_eq!(checked.to_string(), expected);
            let started = start(config(text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
            assert_eq!(started.to_string(), expected);
        }
        assert!(!fresh.exists(), "the refused start removed the file it created");
    })
    .join()
    .unwrap();
}

/// A ramfs mounted on a directory of the test's own: a file system that refuses O_DIRECT (EINVAL),
/// as some do that a start must then refuse to serve with `cache = "none"` or `"read"`. Unmounted at
/// the end, also when the test fails, and its directory removed (`Dir`).
struct Ramfs {
    mnt: PathBuf,
    _dir: Dir,
}

impl Ramfs {
    /// `None`, with the reason on standard error, where there is none to be had: not root, no ramfs
    /// (a mount refused), or a kernel whose ramfs takes O_DIRECT after all.
    fn mount(tag: &str) -> Option<Ramfs> {
        if !common::is_root() {
            common::skipped("not root (the test mounts a ramfs)");
            return None;
        }
        let dir = Dir::new(tag);
        let mnt = dir.path("ramfs");
        std::fs::create_dir(&mnt).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let target = c(mnt.to_str().unwrap());
        // SAFETY: every pointer is to a NUL-terminated string that outlives the call; no data.
        let r = unsafe {
            libc::mount(c("ramfs").as_ptr(), target.as_ptr(), c("ramfs").as_ptr(), 0, std::ptr::null())
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            common::skipped(&format!("cannot mount a ramfs on {}: {e}", mnt.display()));
            return None;
        }
        let fs = Ramfs { mnt, _dir: dir };
        let probe = fs.mnt.join("probe");
        std::fs::write(&probe, [0u8; 4096]).unwrap();
        let direct = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&probe);
        std::fs::remove_file(&probe).unwrap();
        if direct.is_ok() {
            eprintln!("skipped: this kernel's ramfs takes O_DIRECT");
            return None;
        }
        Some(fs)
    }

    /// The names in the file system.
    fn names(&self) -> Vec<String> {
        let names = std::fs::read_dir(&self.mnt).unwrap();
        names.map(|n| n.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.mnt.to_str().unwrap()).unwrap();
        // SAFETY: `target` is a NUL-terminated string that outlives the calls. Detached if still
        // busy (a descriptor a failed assertion left open), so that the directory can go.
        unsafe {
            if libc::umount2(target.as_ptr(), 0) != 0 {
                libc::umount2(target.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}

/// The refusal of a file system without O_DIRECT after `what`, in the words of `check` and a start.
fn no_direct(what: &str) -> String {
    format!(
        "{what}: Invalid argument (os error 22) (its file system may not support O_DIRECT; \
         `cache = \"writeback\"` reads and writes it through the page cache instead)"
    )
}

/// `check` opens an existing export's file as a start does, with O_DIRECT unless `cache =
/// "writeback"` (read-only for a read-only export): on a file system that refuses O_DIRECT it refuses
/// `cache = "none"` and `"read"` in a start's words (it once passed them, and the start failed),
/// passes `"writeback"`, which a start then serves, and leaves the file as it was.
#[test]
fn check_refuses_an_export_whose_file_system_refuses_o_direct_as_a_start_does() {
    let Some(fs) = Ramfs::mount("no-direct") else { return };
    let image = fs.mnt.join("a.img");
    std::fs::write(&image, vec![0x5au8; 1 << 20]).unwrap();
    let expected = format!(
        "test.toml:5: export `a` ({}): {}",
        image.display(),
        no_direct("cannot open it with O_DIRECT")
    );
    for extra in ["", "cache = \"none\"", "cache = \"read\"", "read_only = true"] {
        let text = one_export("\"127.0.0.1:0\"", &image, extra);
        let checked = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        assert_eq!(checked.to_string(), expected, "{extra}");
        let started = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        assert_eq!(started.to_string(), expected, "{extra}");
    }
    let writeback = config(&one_export("\"127.0.0.1:0\"", &image, "cache = \"writeback\""));
    check(&writeback).unwrap();
    start(writeback).unwrap().stop().unwrap();
    assert_eq!(std::fs::read(&image).unwrap(), vec![0x5au8; 1 << 20], "nothing was written");
    assert_eq!(fs.names(), ["a.img"]);
}

/// For an export whose file a start would create, `check` tries O_DIRECT in its directory, on a
/// file without a name that is gone when closed: refused there (it once passed, and a start created
/// the file, failed on it and removed it), as a start now refuses before creating anything; passed
/// with `cache = "writeback"`; and nothing is left in the directory.
#[test]
fn check_tries_o_direct_where_a_start_would_create_the_file_and_leaves_nothing_there() {
    let Some(fs) = Ramfs::mount("no-direct-fresh") else { return };
    let fresh = fs.mnt.join("fresh.img");
    let text = one_export("\"127.0.0.1:0\"", &fresh, "size = \"1MiB\"");
    let checked = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
    let what = format!("a file created in {} cannot be opened with O_DIRECT", fs.mnt.display());
    assert_eq!(
        checked.to_string(),
        format!("test.toml:5: export `a` ({}): {}", fresh.display(), no_direct(&what))
    );
    assert!(fs.names().is_empty(), "check left {:?}", fs.names());
    let started = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
    assert_eq!(started.to_string(), checked.to_string(), "a start checks first");
    assert!(fs.names().is_empty(), "the refused start created nothing");
    check(&config(&one_export("\"127.0.0.1:0\"", &fresh, "size = \"1MiB\"\ncache = \"writeback\""))).unwrap();
    assert!(fs.names().is_empty(), "check left {:?}", fs.names());
}

/// A start that fails to open an export's file with O_DIRECT (which the engine would have refused,
/// naming only "a caller's file descriptor") names the export, its path and the line of its `path`,
/// as its other file errors do: here the second export of two, a file the start creates in a
/// directory where `check` could not try O_DIRECT (no O_TMPFILE: it passes, with a note naming the
/// export and its line), and which the failed start removes.
#[test]
fn a_start_refused_o_direct_names_the_export_its_path_and_the_line_of_its_path() {
    let Some(fs) = Ramfs::mount("no-direct-line") else { return };
    let dir = Dir::new("no-direct-line-good");
    let (good, fresh) = (dir.file("good.img", 1 << 20), fs.mnt.join("b.img"));
    // Line 5: the first export's path; line 10: the second's (after an empty line 6 and one in b).
    let text = format!(
        "{}[[export]]\nname = \"b\"\n\npath = \"{}\"\nsize = \"1MiB\"\n",
        one_export("\"127.0.0.1:0\"", &good, ""),
        fresh.display()
    );
    let expected = format!(
        "test.toml:10: export `b` ({}): {}",
        fresh.display(),
        no_direct("cannot open it with O_DIRECT")
    );
    std::thread::spawn(move || {
        without_o_tmpfile_on_this_thread();
        let notes = check(&config(&text)).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(&format!("test.toml:10: export `b` ({}): not checked", fresh.display())),
            "{notes:?}"
        );
        let e = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        assert!(matches!(e, ServeError::Export { line: Some(10), .. }), "{e:?}");
        assert_eq!(e.to_string(), expected);
    })
    .join()
    .unwrap();
    assert!(fs.names().is_empty(), "the refused start removed the file it created: {:?}", fs.names());
    assert_eq!(std::fs::read(&good).unwrap(), vec![0x5au8; 1 << 20]);
}

/// A machine or container that forbids io_uring (`kernel.io_uring_disabled`, a seccomp profile such
/// as a container runtime's default) refuses `io_uring_setup` (425) with EPERM. `check` says so as a
/// start does, naming the exports and what the refusal usually means, and a start makes nothing
/// first (it once created the export files, then failed with "cannot set up io_uring: Operation not
/// permitted" and no export named).
#[test]
fn a_machine_that_forbids_io_uring_is_named_by_check_and_start_before_anything_is_made() {
    let dir = Dir::new("no-io-uring");
    let (image, fresh) = (dir.file("a.img", 1 << 20), dir.path("b.img"));
    let text = format!(
        "{}[[export]]\nname = \"b\"\npath = \"{}\"\nsize = \"1MiB\"\n",
        one_export("\"127.0.0.1:0\"", &image, ""),
        fresh.display()
    );
    let chain = |e: &ServeError| {
        let mut text = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            text = format!("{text}: {c}");
            cause = c.source();
        }
        text
    };
    std::thread::spawn(move || {
        refuse_on_this_thread(425, libc::EPERM);
        let expected = "cannot start the I/O engine of exports `a`, `b`: cannot set up io_uring: Operation \
                        not permitted (os error 1) (io_uring is refused to this process: the sysctl \
                        kernel.io_uring_disabled, or a seccomp profile such as a container runtime's \
                        default one, may forbid it)";
        let checked = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        assert_eq!(chain(&checked), expected);
        let started = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        assert_eq!(chain(&started), expected);
        assert!(!fresh.exists(), "the refused start made the export file {}", fresh.display());
    })
    .join()
    .unwrap();
    assert_eq!(std::fs::read(&image).unwrap(), vec![0x5au8; 1 << 20]);
}

/// A loop device over a file, read-only (`losetup -r`), detached when dropped.
struct ReadOnlyLoop(String);

impl Drop for ReadOnlyLoop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A block device the kernel holds read-only opens for writing and fails every write: a writable
/// export on one is refused by `check` and by a start alike, naming the setting that serves it; with
/// `read_only = true` it is served (and its clients are told at the handshake).
#[test]
fn a_writable_export_on_a_read_only_block_device_is_refused_with_the_setting_that_serves_it() {
    if !common::is_root() {
        common::skipped("not root (the test attaches a loop device)");
        return;
    }
    let dir = Dir::new("ro-device");
    let image = dir.file("ro.img", 1 << 20);
    let out =
        std::process::Command::new("losetup").args(["-r", "--find", "--show"]).arg(&image).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let device = ReadOnlyLoop(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let text = one_export("\"127.0.0.1:0\"", Path::new(&device.0), "");
    let expected = format!(
        "test.toml:5: export `a` ({}): is a read-only block device, and its writes would fail; set \
         `read_only = true` to serve it read-only",
        device.0
    );
    let checked = check(&config(&text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
    assert_eq!(checked.to_string(), expected);
    let started = start(config(&text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
    assert_eq!(started.to_string(), expected);
    let text = one_export("\"127.0.0.1:0\"", Path::new(&device.0), "read_only = true");
    check(&config(&text)).unwrap();
    start(config(&text)).unwrap().stop().unwrap();
    assert_eq!(std::fs::read(&image).unwrap(), vec![0x5au8; 1 << 20]);
}

/// Two servers on one image would each keep their own read-ahead windows and read cache and corrupt
/// it: an export's file is locked (an OFD lock, the kind qemu's tools take too) while it is served,
/// exclusively for a writable export, shared for a read-only one. A second server is refused by
/// `check` and by a start while the first runs, and starts once it has stopped; two read-only ones
/// share the file.
#[test]
fn an_image_another_server_has_open_is_refused_while_it_serves_it() {
    let dir = Dir::new("locked");
    let image = dir.file("a.img", 1 << 20);
    let writable = one_export("\"127.0.0.1:0\"", &image, "");
    let read_only = one_export("\"127.0.0.1:0\"", &image, "read_only = true");
    let first = start(config(&writable)).unwrap();
    for text in [&writable, &read_only] {
        let checked = check(&config(text)).err().unwrap_or_else(|| panic!("check passed:\n{text}"));
        assert!(
            checked.to_string().contains("): is in use: another process holds a lock on it"),
            "{checked}"
        );
        let started = start(config(text)).err().unwrap_or_else(|| panic!("start passed:\n{text}"));
        assert_eq!(started.to_string(), checked.to_string());
    }
    first.stop().unwrap();
    let readers = [start(config(&read_only)).unwrap(), start(config(&read_only)).unwrap()];
    let refused = start(config(&writable)).err().unwrap_or_else(|| panic!("a writer started beside readers"));
    assert!(refused.to_string().contains("is in use"), "{refused}");
    for r in readers {
        r.stop().unwrap();
    }
    start(config(&writable)).unwrap().stop().unwrap();
    assert_eq!(std::fs::read(&image).unwrap(), vec![0x5au8; 1 << 20]);
}

/// A client over TCP: (stream, reads time out after 10 s).
fn tcp(addr: &str) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Through the handshake to export `a` (fixed newstyle, `NBD_OPT_EXPORT_NAME`, no zeroes).
fn handshake(s: &mut std::net::TcpStream) {
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut opt = b"IHAVEOPT".to_vec();
    opt.extend_from_slice(&1u32.to_be_bytes());
    opt.extend_from_slice(&1u32.to_be_bytes());
    opt.push(b'a');
    s.write_all(&opt).unwrap();
    let mut info = [0u8; 10];
    s.read_exact(&mut info).unwrap();
}

fn request(command: u16, handle: u64, offset: u64, length: u32) -> Vec<u8> {
    common::request_header(0, command, handle, offset, length)
}

/// Whether the server closed the connection: reads reach its end (replies before it are skipped).
fn closed(s: &mut std::net::TcpStream) -> bool {
    let mut b = [0u8; 65536];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Stops `server` on a thread of its own; returns how long the stop took, or panics if it has not
/// finished within 20 s (it never did before the fix: the server stayed as long as its clients).
fn stop_within(server: bfq_serve::ServerHandle) -> Duration {
    let began = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(server.stop());
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("the stop finishes").unwrap();
    began.elapsed()
}

#[test]
fn a_stop_closes_connections_still_negotiating_or_in_the_middle_of_a_payload() {
    let dir = Dir::new("negotiating");
    let image = dir.file("a.img", 4 << 20);
    let server = start(config(&one_export("\"127.0.0.1:0\"", &image, ""))).unwrap();
    let addr = server.addresses()[0].clone();
    // Connected, nothing sent.
    let mut silent = tcp(&addr);
    // Greeted, no option sent.
    let mut greeted = tcp(&addr);
    greeted.read_exact(&mut [0u8; 18]).unwrap();
    greeted.write_all(&3u32.to_be_bytes()).unwrap();
    // A write of 1 MiB whose payload stops after 1,000 bytes.
    let mut writing = tcp(&addr);
    handshake(&mut writing);
    writing.write_all(&request(1, 1, 0, 1 << 20)).unwrap();
    writing.write_all(&[7u8; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let took = stop_within(server);
    eprintln!("the stop took {took:?}");
    let mut hello = [0u8; 18];
    silent.read_exact(&mut hello).unwrap();
    assert!(closed(&mut silent) && closed(&mut greeted) && closed(&mut writing));
    // The write was never acknowledged, and none of it was written.
    assert_eq!(std::fs::read(&image).unwrap()[..1000], [0x5au8; 1000]);
}

/// Sends option `option` with no data; returns the type of each reply up to the last one (an
/// `ACK` or an error; `NBD_REP_SERVER` replies of a list come before it).
fn option_replies(s: &mut std::net::TcpStream, option: u32) -> Vec<u32> {
    let mut b = b"IHAVEOPT".to_vec();
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&b).unwrap();
    let mut kinds = Vec::new();
    loop {
        let mut head = [0u8; 20];
        s.read_exact(&mut head).unwrap();
        let kind = u32::from_be_bytes(head[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
        s.read_exact(&mut vec![0u8; len]).unwrap();
        kinds.push(kind);
        if kind != 2 {
            return kinds;
        }
    }
}

/// The protocol document: a server shutting down "SHOULD error further options received (other
/// than an NBD_OPT_ABORT) with NBD_REP_ERR_SHUTDOWN". A client still negotiating keeps getting that
/// answer as long as it keeps talking (here for twice the half second of silence after which a
/// stop closes a connection), its `NBD_OPT_ABORT` gets its `ACK`, and an `NBD_OPT_EXPORT_NAME`,
/// which can get no error reply, ends its session.
#[test]
fn a_stop_answers_the_options_still_sent_with_err_shutdown_while_the_client_talks() {
    const REP_ACK: u32 = 1;
    const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;
    let dir = Dir::new("negotiating-stop");
    let image = dir.file("a.img", 4 << 20);
    let server = start(config(&one_export("\"127.0.0.1:0\"", &image, ""))).unwrap();
    let addr = server.addresses()[0].clone();
    let greet = |s: &mut std::net::TcpStream| {
        s.read_exact(&mut [0u8; 18]).unwrap();
        s.write_all(&3u32.to_be_bytes()).unwrap();
    };
    let (mut talking, mut naming) = (tcp(&addr), tcp(&addr));
    greet(&mut talking);
    greet(&mut naming);
    assert_eq!(option_replies(&mut talking, 3), [2, REP_ACK], "NBD_OPT_LIST before the stop");
    let stopping = std::thread::spawn(move || stop_within(server));
    // Until the stop has begun, a list is still answered.
    let mut tries = 0;
    while option_replies(&mut talking, 3) != [REP_ERR_SHUTDOWN] {
        tries += 1;
        assert!(tries < 100, "no NBD_REP_ERR_SHUTDOWN within 10 s of the stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(option_replies(&mut talking, 3), [REP_ERR_SHUTDOWN], "an option while stopping");
    }
    let mut export_name = b"IHAVEOPT".to_vec();
    export_name.extend_from_slice(&1u32.to_be_bytes());
    export_name.extend_from_slice(&1u32.to_be_bytes());
    export_name.push(b'a');
    naming.write_all(&export_name).unwrap();
    assert_eq!(option_replies(&mut talking, 2), [REP_ACK], "NBD_OPT_ABORT while stopping");
    assert!(closed(&mut talking) && closed(&mut naming));
    let took = stopping.join().unwrap();
    eprintln!("the stop took {took:?}");
}

/// A client that connects and does not finish negotiating within `handshake_limit` is
/// disconnected (as qemu's NBD server does since CVE-2024-7409: connections that never negotiate
/// use up a server's descriptors), whether it is silent or keeps sending options; one that
/// negotiates in time is served past the limit.
#[test]
fn a_client_that_does_not_negotiate_within_handshake_limit_is_disconnected() {
    let dir = Dir::new("handshake-limit");
    let image = dir.file("a.img", 4 << 20);
    let text = format!("handshake_limit = \"1s\"\n{}", one_export("\"127.0.0.1:0\"", &image, ""));
    let server = start(config(&text)).unwrap();
    let addr = server.addresses()[0].clone();
    let began = Instant::now();
    let mut silent = tcp(&addr);
    let mut listing = tcp(&addr);
    listing.read_exact(&mut [0u8; 18]).unwrap();
    listing.write_all(&3u32.to_be_bytes()).unwrap();
    let mut served = tcp(&addr);
    handshake(&mut served);
    // The lister keeps asking for the list, every 100 ms, past the limit.
    let mut lists = 0;
    while began.elapsed() < Duration::from_secs(3) {
        let mut b = b"IHAVEOPT".to_vec();
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        if listing.write_all(&b).is_err() {
            break;
        }
        let mut head = [0u8; 20];
        if listing.read_exact(&mut head).is_err() {
            break;
        }
        let len = u32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
        if listing.read_exact(&mut vec![0u8; len]).is_err() {
            break;
        }
        lists += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(closed(&mut listing), "a client still negotiating after the limit");
    assert!((5..40).contains(&lists), "{lists} replies before the limit of 1 s");
    let mut hello = [0u8; 18];
    silent.read_exact(&mut hello).unwrap();
    assert!(closed(&mut silent), "a silent client after the limit");
    assert!(began.elapsed() < Duration::from_secs(8), "closed only after {:?}", began.elapsed());
    // Negotiated in time: served after the limit.
    served.write_all(&request(0, 1, 0, 4096)).unwrap();
    let mut reply = vec![0u8; 16 + 4096];
    served.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[4..8], &[0, 0, 0, 0], "a read after the limit");
    stop_within(server);
}

#[test]
fn a_stop_closes_connections_still_open_after_stop_timeout() {
    let dir = Dir::new("stop-timeout");
    let image = dir.file("a.img", 4 << 20);
    let text = format!("stop_timeout = \"1s\"\n{}", one_export("\"127.0.0.1:0\"", &image, ""));
    let server = start(config(&text)).unwrap();
    let addr = server.addresses()[0].clone();
    // A client that keeps sending reads after the stop, every 100 ms (each answered, ESHUTDOWN).
    let mut busy = tcp(&addr);
    handshake(&mut busy);
    let keep_sending = {
        let mut s = busy.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut h = 0;
            while s.write_all(&request(0, h, 0, 4096)).is_ok() && h < 300 {
                h += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // A client that sends 64 reads of 1 MiB and reads no reply.
    let mut deaf = tcp(&addr);
    handshake(&mut deaf);
    for h in 0..64 {
        deaf.write_all(&request(0, h, 0, 1 << 20)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let took = stop_within(server);
    eprintln!("the stop took {took:?}");
    assert!(closed(&mut busy) && closed(&mut deaf));
    keep_sending.join().unwrap();
}

/// The size an export is served with, by `NBD_OPT_EXPORT_NAME` on the Unix socket.
fn served_size(socket: &Path, name: &str) -> u64 {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    // Fixed newstyle, no zeroes; then the option that answers with the size at once.
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut option = b"IHAVEOPT".to_vec();
    option.extend_from_slice(&1u32.to_be_bytes());
    option.extend_from_slice(&(name.len() as u32).to_be_bytes());
    option.extend_from_slice(name.as_bytes());
    s.write_all(&option).unwrap();
    let mut size = [0u8; 8];
    s.read_exact(&mut size).unwrap();
    u64::from_be_bytes(size)
}

#[test]
fn a_file_larger_than_the_engine_addresses_is_served_up_to_its_first_pebibyte() {
    // The I/O engine addresses 1 PiB of a file (`bfq_io::TARGET_BYTES`); an existing file or device
    // larger than that was served whole, and every request past 1 PiB failed. A sparse file on tmpfs,
    // which holds one that large.
    if !Path::new("/dev/shm").is_dir() {
        return common::skipped("no /dev/shm for a sparse file of more than 1 PiB");
    }
    let dir = Dir::new("pib");
    let big = PathBuf::from(format!("/dev/shm/bfq-serve-pib-{}.img", std::process::id()));
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _remove = Remove(big.clone());
    let f = std::fs::File::create(&big).unwrap();
    if f.set_len(bfq_io::TARGET_BYTES + (1 << 20)).is_err() {
        return common::skipped("tmpfs refused a sparse file of more than 1 PiB");
    }
    let socket = dir.path("s.sock");
    let server = start(config(&one_export(&format!("\"unix:{}\"", socket.display()), &big, ""))).unwrap();
    let size = served_size(&socket, "a");
    server.stop().unwrap();
    assert_eq!(size, bfq_io::TARGET_BYTES);
}

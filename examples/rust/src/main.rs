//! A Rust embedder of libkiln through plain `extern "C"` declarations mirroring kiln.h: opens
//! an archive and prints, for every kernel, the route it takes on device 0 and why.
//! usage: kiln-routes ARCHIVE TRUSTED_KEY
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::ptr;

#[repr(C)]
struct RuntimeOptions {
    size: u32,
    signature_threshold: u32,
    trust_path: *const c_char,
    policy: u32,
    log_level: u32,
    log_fn: *const c_void,
    log_user: *mut c_void,
    max_member_size: u64,
    cuda_driver_path: *const c_char,
    error_buffer: *mut c_char,
    error_buffer_size: usize,
}

enum Runtime {}
enum Archive {}
enum Kernel {}

#[link(name = "kiln")]
extern "C" {
    fn kiln_version_string() -> *const c_char;
    fn kiln_runtime_options_init(options: *mut RuntimeOptions, size: usize) -> c_int;
    fn kiln_runtime_create(out: *mut *mut Runtime, options: *const RuntimeOptions) -> c_int;
    fn kiln_runtime_destroy(runtime: *mut Runtime);
    fn kiln_runtime_last_error(runtime: *const Runtime, buffer: *mut c_char, capacity: usize, needed: *mut usize) -> c_int;
    fn kiln_archive_open(runtime: *mut Runtime, path: *const c_char, out: *mut *mut Archive) -> c_int;
    fn kiln_archive_destroy(archive: *mut Archive);
    fn kiln_archive_digest(archive: *const Archive) -> *const c_char;
    fn kiln_archive_kernel_count(archive: *const Archive) -> usize;
    fn kiln_archive_kernel_name(archive: *const Archive, index: usize) -> *const c_char;
    fn kiln_archive_get_kernel(archive: *mut Archive, name: *const c_char, device: c_int, out: *mut *mut Kernel) -> c_int;
    fn kiln_kernel_route(kernel: *const Kernel) -> c_uint;
    fn kiln_route_string(route: c_uint) -> *const c_char;
    fn kiln_kernel_reason_text(kernel: *const Kernel) -> *const c_char;
}

fn text(p: *const c_char) -> String {
    if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: {} ARCHIVE TRUSTED_KEY", args[0]);
        std::process::exit(2);
    }
    let (archive_path, trust) = (CString::new(args[1].clone()).unwrap(), CString::new(args[2].clone()).unwrap());
    let mut error = vec![0 as c_char; 1024];
    unsafe {
        let mut options: RuntimeOptions = std::mem::zeroed();
        kiln_runtime_options_init(&mut options, std::mem::size_of::<RuntimeOptions>());
        options.trust_path = trust.as_ptr();
        options.error_buffer = error.as_mut_ptr();
        options.error_buffer_size = error.len();
        let mut runtime: *mut Runtime = ptr::null_mut();
        if kiln_runtime_create(&mut runtime, &options) != 0 {
            eprintln!("kiln: {}", text(error.as_ptr()));
            std::process::exit(1);
        }
        let mut archive: *mut Archive = ptr::null_mut();
        if kiln_archive_open(runtime, archive_path.as_ptr(), &mut archive) != 0 {
            kiln_runtime_last_error(runtime, error.as_mut_ptr(), error.len(), ptr::null_mut());
            eprintln!("kiln: {}", text(error.as_ptr()));
            kiln_runtime_destroy(runtime);
            std::process::exit(1);
        }
        println!("libkiln {} from Rust: archive {}", text(kiln_version_string()), text(kiln_archive_digest(archive)));
        for i in 0..kiln_archive_kernel_count(archive) {
            let name = kiln_archive_kernel_name(archive, i);
            let mut kernel: *mut Kernel = ptr::null_mut();
            if kiln_archive_get_kernel(archive, name, 0, &mut kernel) == 0 {
                println!("  {:16} {:9} {}", text(name), text(kiln_route_string(kiln_kernel_route(kernel))),
                         text(kiln_kernel_reason_text(kernel)));
            }
        }
        kiln_archive_destroy(archive);
        kiln_runtime_destroy(runtime);
    }
}

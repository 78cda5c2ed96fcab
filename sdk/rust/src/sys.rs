//! The host functions of module `weft` (abi/README.md §4), as the host
//! declares them. Every `i32` of the ABI is a pointer, a `usize` or an `i32`
//! here: pointers and `usize` are 32 bits on wasm32.
//!
//! A module imports only the functions it calls, and rustc imports only
//! those, so a plugin that never calls `secret` or `http_request` loads on a
//! host that predates them (§11).

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "weft")]
extern "C" {
    pub fn result(ptr: *const u8, len: usize);
    pub fn log(level: i32, ptr: *const u8, len: usize);
    pub fn heartbeat(ptr: *const u8, len: usize) -> i32;
    pub fn cancelled() -> i32;
    pub fn info(buf: *mut u8, cap: usize) -> i32;
    pub fn last_heartbeat(buf: *mut u8, cap: usize) -> i32;
    pub fn config(key: *const u8, key_len: usize, buf: *mut u8, cap: usize) -> i32;
    pub fn secret(name: *const u8, name_len: usize, buf: *mut u8, cap: usize) -> i32;
    #[allow(clippy::too_many_arguments)]
    pub fn http_request(
        method: *const u8,
        method_len: usize,
        url: *const u8,
        url_len: usize,
        headers: *const u8,
        headers_len: usize,
        body: *const u8,
        body_len: usize,
    ) -> i32;
    pub fn http_response_headers(buf: *mut u8, cap: usize) -> i32;
    pub fn http_response_body(buf: *mut u8, cap: usize) -> i32;
}

// Outside WebAssembly there is no host: these stand-ins let the kit (and a
// plugin's own logic) be compiled and unit-tested natively, and fail loudly
// if a test reaches the host.
#[cfg(not(target_arch = "wasm32"))]
mod native {
    fn no_host() -> ! {
        panic!("weft: host functions exist only in a wasm32 plugin run by the Weft host")
    }
    pub unsafe fn result(_: *const u8, _: usize) {
        no_host()
    }
    pub unsafe fn log(_: i32, _: *const u8, _: usize) {
        no_host()
    }
    pub unsafe fn heartbeat(_: *const u8, _: usize) -> i32 {
        no_host()
    }
    pub unsafe fn cancelled() -> i32 {
        no_host()
    }
    pub unsafe fn info(_: *mut u8, _: usize) -> i32 {
        no_host()
    }
    pub unsafe fn last_heartbeat(_: *mut u8, _: usize) -> i32 {
        no_host()
    }
    pub unsafe fn config(_: *const u8, _: usize, _: *mut u8, _: usize) -> i32 {
        no_host()
    }
    pub unsafe fn secret(_: *const u8, _: usize, _: *mut u8, _: usize) -> i32 {
        no_host()
    }
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn http_request(
        _: *const u8,
        _: usize,
        _: *const u8,
        _: usize,
        _: *const u8,
        _: usize,
        _: *const u8,
        _: usize,
    ) -> i32 {
        no_host()
    }
    pub unsafe fn http_response_headers(_: *mut u8, _: usize) -> i32 {
        no_host()
    }
    pub unsafe fn http_response_body(_: *mut u8, _: usize) -> i32 {
        no_host()
    }
}
#[cfg(not(target_arch = "wasm32"))]
pub use native::*;

//! `Text`: a command's output as a JavaScript string. A large ASCII output becomes an
//! external string over the Rust buffer (Node-API's `node_api_create_external_string_latin1`)
//! instead of a copy decoded into V8's heap: a 50 MB output then costs V8 neither the
//! decoding pass nor a second 50 MB.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::sys;

/// Below this a copy costs less than an external string's bookkeeping, and a small string
/// copied into V8's heap is freed with it rather than by a finalizer.
const EXTERNAL_FROM: usize = 64 * 1024;

/// V8's longest string (`v8::String::kMaxLength` on 64-bit hosts). Longer ones go the copying
/// way, which refuses them with its own error; the external way would fail with the buffer
/// still ours, but only this check makes that certain.
const V8_MAX_LENGTH: usize = (1 << 29) - 24;

/// A string handed to JavaScript as it is (`ToNapiValue`); its TypeScript type is `string`.
/// Made where the output is (a runtime thread, for a command's result), which also reads
/// whether it can be external: the JavaScript thread then only makes the string.
pub struct Text {
  text: String,
  external: bool,
}

impl Text {
  pub fn new(text: String) -> Text {
    let external = (EXTERNAL_FROM..=V8_MAX_LENGTH).contains(&text.len()) && text.is_ascii();
    Text { text, external }
  }
}

impl TypeName for Text {
  fn type_name() -> &'static str {
    "String"
  }

  fn value_type() -> ValueType {
    ValueType::String
  }
}

impl ToNapiValue for Text {
  unsafe fn to_napi_value(env: sys::napi_env, text: Self) -> napi::Result<sys::napi_value> {
    let Text { text, external } = text;
    let length = text.len();
    let external = match create_external_latin1() {
      // ASCII is Latin-1 byte for byte: the buffer is the string.
      Some(create) if external => create,
      _ => return unsafe { String::to_napi_value(env, text) },
    };
    // V8 schedules collections by its heap and by the memory it is told of; an external
    // string is neither, so without this a loop of large outputs would hold them all
    // until some other allocation set off a collection. Told before the call: a string
    // copied at once is finalized (and untold) within it.
    let bytes = length as i64;
    adjust_external_memory(env, bytes);
    let owned = Box::into_raw(Box::new(text));
    // SAFETY: `owned` stays valid and unchanged until `drop_owned` frees it, which Node calls
    // once the string is collected, or before returning when it copied the bytes instead
    // (then `copied` is set). A failed call keeps nothing: V8 fails only on a resource too
    // long, before keeping it (it frees an empty one at once, and succeeds); neither is
    // asked for here.
    let mut value = std::ptr::null_mut();
    let mut copied = false;
    let status = unsafe {
      let data = (*owned).as_ptr().cast::<c_char>().cast_mut();
      external(
        env,
        data,
        length as isize,
        Some(drop_owned),
        owned.cast(),
        &mut value,
        &mut copied,
      )
    };
    if status != sys::Status::napi_ok {
      adjust_external_memory(env, -bytes);
      // SAFETY: not taken (see above): still ours alone.
      let text = unsafe { Box::from_raw(owned) };
      return unsafe { String::to_napi_value(env, *text) };
    }
    Ok(value)
  }
}

/// `node_api_create_external_string_latin1`'s signature (Node-API 10).
type CreateExternalLatin1 = unsafe extern "C" fn(
  env: sys::napi_env,
  data: *mut c_char,
  length: isize,
  finalize: Option<unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void)>,
  hint: *mut c_void,
  result: *mut sys::napi_value,
  copied: *mut bool,
) -> sys::napi_status;

/// The host's `node_api_create_external_string_latin1`, where it has one: Node 22 and 24
/// export it as part of Node-API 10, Node 20 from 20.4 on as experimental; an older host, or
/// an embedder without it, gets copies.
fn create_external_latin1() -> Option<CreateExternalLatin1> {
  static FOUND: OnceLock<Option<CreateExternalLatin1>> = OnceLock::new();
  *FOUND.get_or_init(|| {
    // SAFETY: a look-up by name in the process's global symbols, which the host exports.
    let symbol = unsafe {
      libc::dlsym(
        libc::RTLD_DEFAULT,
        c"node_api_create_external_string_latin1".as_ptr(),
      )
    };
    // SAFETY: the symbol is that Node-API function, whose signature is the one above.
    (!symbol.is_null())
      .then(|| unsafe { std::mem::transmute::<*mut c_void, CreateExternalLatin1>(symbol) })
  })
}

/// The external string's finalizer: frees the buffer it was made over and untells V8 of it.
/// It touches no JavaScript value, as a finalizer that may run during garbage collection
/// must not (adjusting the external memory is allowed there: Node-API's "basic" calls).
/// `env` is null once the environment is gone.
unsafe extern "C" fn drop_owned(env: sys::napi_env, _data: *mut c_void, owned: *mut c_void) {
  // SAFETY: `owned` came from `Box::into_raw` in `to_napi_value`, and Node calls this once.
  let text = unsafe { Box::from_raw(owned.cast::<String>()) };
  if !env.is_null() {
    adjust_external_memory(env, -(text.len() as i64));
  }
}

/// Tells V8 of `bytes` more (or fewer) held outside its heap. Its only failure is a null
/// `env`, which the callers rule out.
fn adjust_external_memory(env: sys::napi_env, bytes: i64) {
  let mut total = 0;
  // SAFETY: `env` is a live environment, on its thread.
  unsafe { sys::napi_adjust_external_memory(env, bytes, &mut total) };
}

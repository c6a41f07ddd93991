// Tokens, pointer loads and stores, and their memory ordering (rule families operand.count,
// type.operand, type.pointee, type.mismatch, memory.*), in NVIDIA's words first.

entry @k() {
  %t = make_token : token
  // expected-error@+1 {{'cuda_tile.join_tokens' op expect two or more tokens (join_tokens needs two or more tokens, got 1)}}
  %j = join_tokens %t : token
  return
}

// -----

entry @k(%p: tile<ptr<i32>>) {
  // expected-error@+1 {{'cuda_tile.load_ptr_tko' op failed to verify that `source` type is expected a pointer type of `result` type (operand 'source' points to i32 but result 'result' holds f32)}}
  %v, %t = load_ptr_tko weak %p : tile<ptr<i32>> -> tile<f32>, token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %x: tile<f16>) {
  // expected-error@+1 {{'cuda_tile.store_ptr_tko' op failed to verify that `destination` type is expected a pointer type of `value` type (operand 'destination' points to f32 but operand 'value' holds f16)}}
  %t = store_ptr_tko weak %p, %x : tile<ptr<f32>>, tile<f16> -> token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %m: tile<i1>, %pad: tile<f16>) {
  // expected-error@+1 {{'cuda_tile.load_ptr_tko' op failed to verify that type of 'paddingValue' must match the type of 'result' (paddingValue type tile<f16> does not match result type tile<f32>)}}
  %v, %t = load_ptr_tko weak %p, %m, %pad : tile<ptr<f32>>, tile<i1>, tile<f16> -> tile<f32>, token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %q: tile<ptr<f32>>) {
  // a second operand that is neither an i1 mask nor of the result's type is read as the mask
  // expected-error@+1 {{'cuda_tile.load_ptr_tko' op operand #1 must be tile of i1 values, but got '!cuda_tile.tile<ptr<f32>>'}}
  %v, %t = load_ptr_tko weak %p, %q : tile<ptr<f32>>, tile<ptr<f32>> -> tile<f32>, token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %pad: tile<f32>) {
  // one that has the result's type is the padding value
  // expected-error@+1 {{'cuda_tile.load_ptr_tko' op memory scope is required for acquire load (a acquire access needs a memory scope)}}
  %v, %t = load_ptr_tko acquire %p, %pad : tile<ptr<f32>>, tile<f32> -> tile<f32>, token
  return
}

// -----

entry @k(%x: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.load_ptr_tko' op operand #0 must be tile of Pointer type values, but got '!cuda_tile.tile<f32>' (operand 'source' must be a tile of pointers, got tile<f32>)}}
  %v, %t = load_ptr_tko weak %x : tile<f32> -> tile<f32>, token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %x: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.store_ptr_tko' op weak store must not have memory scope (a weak access takes no memory scope, got device)}}
  %t = store_ptr_tko weak device %p, %x : tile<ptr<f32>>, tile<f32> -> token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %x: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.store_ptr_tko' op expect one of: weak, relaxed, or release, but got: acquire (memory ordering acquire is not allowed; expected one of weak, relaxed, release)}}
  %t = store_ptr_tko acquire device %p, %x : tile<ptr<f32>>, tile<f32> -> token
  return
}

// -----

entry @k(%p: tile<ptr<f32>>, %x: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.store_ptr_tko' op memory scope is required for release store (a release access needs a memory scope)}}
  %t = store_ptr_tko release %p, %x : tile<ptr<f32>>, tile<f32> -> token
  return
}

// Operand and result types the verifier refuses (rule family type.*).

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values, but got '!cuda_tile.tile<i32>' (operand 'lhs')}}
  %0 = addf %a, %a : tile<i32>
  return
}

// -----

entry @k(%b: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.addi' op operand #0 must be tile of i1 or i8 or i16 or i32 or i64 values, but got '!cuda_tile.tile<f32>' (operand 'lhs')}}
  %0 = addi %b, %b : tile<f32>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{'cuda_tile.exti' op extending to smaller or identical integer (exti must widen: i32 to i16)}}
  %0 = exti %a signed : tile<i32> -> tile<i16>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{'cuda_tile.trunci' op truncating to larger or identical integer (trunci must narrow: i32 to i64)}}
  %0 = trunci %a : tile<i32> -> tile<i64>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.ftof' op converting tiles must not be a no-op (converting tile<f32> to itself)}}
  %0 = ftof %a : tile<f32> -> tile<f32>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{result 'result' must be tile<i1>, got tile<i32>}}
  %0 = cmpi equal %a, %a, signed : tile<i32> -> tile<i32>
  return
}

// -----

entry @k(%p: tile<i1>) {
  %c = constant <f32: 1.0> : tile<4xf32>
  %d = constant <f32: 2.0> : tile<8xf32>
  // (the custom form reads %d at the result's type, so only the generic form gets this far)
  // expected-error@+1 {{operand 'val_if_false' type tile<8xf32> does not match operand 'val_if_true' type tile<4xf32>}}
  %0 = "cuda_tile.select"(%p, %c, %d) : (tile<i1>, tile<4xf32>, tile<8xf32>) -> tile<4xf32>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.divi' op operand #0 must be tile of i1 or i8 or i16 or i32 or i64 values, but got '!cuda_tile.tile<f32>' (operand 'lhs')}}
  %0 = divi %a, %a signed : tile<f32>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{'cuda_tile.negf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values, but got '!cuda_tile.tile<i32>' (operand 'source')}}
  %0 = negf %a : tile<i32>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.bitcast' op types must be equal width (bitcast needs equal widths, f32 is 32 bits and i64 is 64 bits)}}
  %0 = bitcast %a : tile<f32> -> tile<i64>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{'cuda_tile.itof' op result #0 must be tile of f16 or bf16 or f32 or f64 or tf32 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN or fnv8E5M3FNU values, but got '!cuda_tile.tile<i32>' (result 'to')}}
  %0 = itof %a signed : tile<i32> -> tile<i32>
  return
}

// -----

entry @k(%a: tile<i16>) {
  // expected-error@+1 {{'cuda_tile.exti' op extending to smaller or identical integer (exti must widen: i16 to i16)}}
  %0 = exti %a unsigned : tile<i16> -> tile<i16>
  return
}

// -----

entry @k(%a: tile<i16>) {
  // expected-error@+1 {{'cuda_tile.itof' op integer to f8E8M0FNU conversion is not supported, please first convert to another float type}}
  %0 = itof %a signed : tile<i16> -> tile<f8E8M0FNU>
  return
}

// -----

entry @k() {
  // expected-error@+1 {{'cuda_tile.iota' op expects result type to be 1-d tile (got tile<4x8xi32>, of rank 2)}}
  %0 = iota : tile<4x8xi32>
  return
}

// -----

entry @k() {
  // expected-error@+1 {{'cuda_tile.iota' op expects result type to be 1-d tile (got tile<i32>, of rank 0)}}
  %0 = iota : tile<i32>
  return
}

// -----

entry @k() {
  // expected-error@+1 {{'cuda_tile.iota' op the number of elements 512 exceeds the maximum value of element type 'i8' (512 elements exceed the range of i8)}}
  %0 = iota : tile<512xi8>
  return
}

// -----

entry @k() {
  // expected-error@+1 {{'cuda_tile.iota' op result #0 must be tile of i1 or i8 or i16 or i32 or i64 values, but got '!cuda_tile.tile<8xf32>'}}
  %0 = iota : tile<8xf32>
  return
}

// -----

entry @k(%a: tile<f16>) {
  // expected-error@+1 {{'cuda_tile.divf' op approx modifier only supported for f32 data type, but got: 'f16' (rounding_mode approx is only supported for f32, got f16)}}
  %0 = divf %a, %a rounding<approx> : tile<f16>
  return
}

// -----

entry @k(%a: tile<f16>) {
  // flush_to_zero is checked before approx, as NVIDIA's shared div/sqrt check does
  // expected-error@+1 {{'cuda_tile.sqrt' op flush_to_zero modifier only supported for f32 data type, but got: 'f16' (flush_to_zero is only supported for f32, got f16)}}
  %0 = sqrt %a rounding<approx> flush_to_zero : tile<f16>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{'cuda_tile.tanh' op invalid rounding mode specified, expect one of [approx, full] (rounding_mode zero is not allowed here; expected one of approx, full)}}
  %0 = tanh %a rounding<zero> : tile<f32>
  return
}

// -----

// ftof rounding modes: each kind of conversion has its own sentence in tileiras 13.5, and the
// widening ones take every IEEE mode (the open repository's verifier allows nearest_even only).
entry @k(%h: tile<f16>, %s: tile<f32>, %d: tile<f64>) {
  %ok0 = ftof %s rounding<negative_inf> : tile<f32> -> tile<f64>
  %ok1 = ftof %h rounding<nearest_away> : tile<f16> -> tile<f32>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified for widening conversion. Only IEEE float rounding modes are supported: 'nearest_even', 'zero', 'negative_inf', 'positive_inf', 'nearest_away' (rounding_mode approx is not allowed for f16 to f64)}}
  %0 = ftof %h rounding<approx> : tile<f16> -> tile<f64>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified. Only 'nearest_even' and 'zero' are supported for narrowing conversions to standard types (rounding_mode negative_inf is not allowed for f64 to f16)}}
  %1 = ftof %d rounding<negative_inf> : tile<f64> -> tile<f16>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified for conversion from f64 to f32. Only 'nearest_even', 'zero', 'negative_inf', and 'positive_inf' are supported}}
  %2 = ftof %d rounding<nearest_away> : tile<f64> -> tile<f32>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified for conversion from f32 to tf32. Only 'nearest_even', 'zero', and 'nearest_away' are supported}}
  %3 = ftof %s rounding<positive_inf> : tile<f32> -> tile<tf32>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified for conversion to low-precision type. Only 'nearest_even' is supported}}
  %4 = ftof %h rounding<zero> : tile<f16> -> tile<f8E4M3FN>
  // expected-error@+1 {{'cuda_tile.ftof' op invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' and 'positive_inf' are supported}}
  %5 = ftof %s rounding<nearest_even> : tile<f32> -> tile<f8E8M0FNU>
  return
}

// -----

// A comparison's result: its own type constraint (a tile of i1) first, then the shape it shares
// with the operands (both in tileiras 13.5's words).
entry @k(%a: tile<i32>, %b: tile<f32>) {
  %v = reshape %a : tile<i32> -> tile<1xi32>
  %w = broadcast %v : tile<1xi32> -> tile<4xi32>
  // expected-error@+1 {{'cuda_tile.cmpi' op result #0 must be tile of i1 values, but got '!cuda_tile.tile<4xi8>' (result 'result' must be tile<4xi1>, got tile<4xi8>)}}
  %0 = cmpi less_than %w, %w, signed : tile<4xi32> -> tile<4xi8>
  // expected-error@+1 {{'cuda_tile.cmpi' op failed to verify that Result type has i1 element type and same shape as operands (result 'result' must be tile<4xi1>, got tile<2xi1>)}}
  %1 = cmpi less_than %w, %w, signed : tile<4xi32> -> tile<2xi1>
  // expected-error@+1 {{'cuda_tile.cmpf' op failed to verify that Result type has i1 element type and same shape as operands (result 'result' must be tile<i1>, got tile<1xi1>)}}
  %2 = cmpf equal ordered %b, %b : tile<f32> -> tile<1xi1>
  return
}

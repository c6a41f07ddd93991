// Operand and result types the verifier refuses (rule family type.*).

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{operand 'lhs' must be a tile of f16, bf16, f32 or f64, got tile<i32>}}
  %0 = addf %a, %a : tile<i32>
  return
}

// -----

entry @k(%b: tile<f32>) {
  // expected-error@+1 {{operand 'lhs' must be a tile of integer, got tile<f32>}}
  %0 = addi %b, %b : tile<f32>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{exti must widen: i32 to i16}}
  %0 = exti %a signed : tile<i32> -> tile<i16>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{trunci must narrow: i32 to i64}}
  %0 = trunci %a : tile<i32> -> tile<i64>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{converting tile<f32> to itself}}
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

entry @k(%a: tile<i32>) {
  %c = constant <i32: 1> : tile<4xi32>
  %d = constant <i32: 2> : tile<8xi32>
  // expected-error@+1 {{operand 'rhs' type tile<8xi32> does not match operand 'lhs' type tile<4xi32>}}
  %0 = addi %c, %d : tile<4xi32>
  return
}

// -----

entry @k(%p: tile<i1>) {
  %c = constant <f32: 1.0> : tile<4xf32>
  %d = constant <f32: 2.0> : tile<8xf32>
  // expected-error@+1 {{operand 'val_if_false' type tile<8xf32> does not match operand 'val_if_true' type tile<4xf32>}}
  %0 = select %p, %c, %d : tile<i1>, tile<4xf32>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{operand 'lhs' must be a tile of integer, got tile<f32>}}
  %0 = divi %a, %a signed : tile<f32>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{operand 'source' must be a tile of f16, bf16, f32 or f64, got tile<i32>}}
  %0 = negf %a : tile<i32>
  return
}

// -----

entry @k(%a: tile<f32>) {
  // expected-error@+1 {{bitcast needs equal widths, f32 is 32 bits and i64 is 64 bits}}
  %0 = bitcast %a : tile<f32> -> tile<i64>
  return
}

// -----

entry @k(%a: tile<i32>) {
  // expected-error@+1 {{result 'to' must be a tile of float, got tile<i32>}}
  %0 = itof %a signed : tile<i32> -> tile<i32>
  return
}

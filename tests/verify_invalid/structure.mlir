// Module structure, entry signatures and terminators (rule families symbol.*, entry.*, terminator.*).

entry @k(%a: tile<i32>) {
  return
}
// expected-error@+1 {{symbol @k is already defined}}
entry @k(%a: tile<i32>) {
  return
}

// -----

// expected-error@+1 {{parameter 0 must be a scalar tile (tile<E> or tile<ptr<E>>), got tile<4xi32>}}
entry @k(%a: tile<4xi32>) {
  return
}

// -----

entry @k() {
  %c = constant <f32: 1.0> : tile<4xf32>
  // expected-error@+1 {{return operands (tile<4xf32>) do not match what entry expects ()}}
  return %c : tile<4xf32>
}

// -----

entry @k(%n: tile<i32>) {
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  for %i in (%c0 to %n, step %c1) : tile<i32> {
    // expected-error@+2 {{break must be nested (through if only) in loop, not in for}}
    // expected-error@+1 {{break cannot end a for region; expected continue}}
    break
  }
  return
}

// -----

entry @k() {
  // expected-error@+2 {{yield cannot end a entry region; it ends if, reduce and scan regions}}
  // expected-error@+1 {{yield cannot end a entry region; expected return}}
  yield
}

// -----

entry @k(%n: tile<i32>) {
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %f = constant <f32: 1.0> : tile<f32>
  %r = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%x = %c0) -> (tile<i32>) {
    // expected-error@+1 {{continue operands (tile<f32>) do not match what for expects (tile<i32>)}}
    continue %f : tile<f32>
  }
  return
}

// -----

entry @k(%p: tile<i1>) {
  %c0 = constant <i32: 0> : tile<i32>
  // expected-error@+1 {{an if with results needs an else region that yields them}}
  %r = if %p -> (tile<i32>) {
    yield %c0 : tile<i32>
  }
  return
}

// -----

entry @k(%p: tile<i1>) {
  %c0 = constant <i32: 0> : tile<i32>
  %f = constant <f32: 1.0> : tile<f32>
  // expected-error@+1 {{yield operands (tile<f32>) do not match what if expects (tile<i32>)}}
  %r = if %p -> (tile<i32>) {
    yield %f : tile<f32>
  } else {
    yield %c0 : tile<i32>
  }
  return
}

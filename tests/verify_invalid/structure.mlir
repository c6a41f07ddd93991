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

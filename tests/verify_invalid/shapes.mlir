// Shapes the verifier refuses (rule family shape.*).

entry @k() {
  %c = constant <f32: 1.0> : tile<4xf32>
  // expected-error@+1 {{reshape from 4 to 8 changes the number of elements}}
  %0 = reshape %c : tile<4xf32> -> tile<8xf32>
  return
}

// -----

entry @k() {
  %c = constant <f32: 1.0> : tile<4xf32>
  // expected-error@+1 {{result 'result' rank 2 does not match operand 'source' rank 1}}
  %0 = broadcast %c : tile<4xf32> -> tile<2x8xf32>
  return
}

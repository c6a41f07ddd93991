// reduce and scan, checked in the order NVIDIA's verifier checks them (rule families attr.dim,
// attr.identities, result.count, shape.mismatch, type.mismatch, region.*, terminator.types).

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op expect same number of operands and results (expected 1 results, one per operand, got 2)}}
  %r:2 = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>, tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  %w = constant <i32: [1, 2]> : tile<2xi32>
  // expected-error@+1 {{'cuda_tile.scan' op requires the same shape for all operands (operand 1 shape 2 does not match operand 0 shape 4)}}
  %r:2 = scan %v, %w dim=0 reverse=false identities=[0.0 : f32, 0 : i32] : tile<4xf32>, tile<2xi32> -> tile<4xf32>, tile<2xi32>
  (%a: tile<f32>, %b: tile<f32>, %c: tile<i32>, %d: tile<i32>) {
    yield %a, %c : tile<f32>, tile<i32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op attribute 'dim' failed to satisfy constraint: 32-bit signless integer attribute whose value is non-negative (dim -2 is negative)}}
  %r = reduce %v dim=-2 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.scan' op dimension (3) is out of bound [0, 1) (dim 3 is outside [0, 1))}}
  %r = scan %v dim=3 reverse=false identities=[0.0 : f32] : tile<4xf32> -> tile<4xf32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.scan' op expect same type for operand at index: 0 and result at index: 0 (result 0 must be tile<4xf32>, got tile<f32>)}}
  %r = scan %v dim=0 reverse=false identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+2 {{'cuda_tile.reduce' op inferred type(s) '!cuda_tile.tile<f32>' are incompatible with return type(s) of operation '!cuda_tile.tile<1xf32>'}}
  // expected-error@+1 {{'cuda_tile.reduce' op failed to infer returned types}}
  %r = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<1xf32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op expect 0-rank tile type at index: 1 but got: '!cuda_tile.tile<2xf32>'}}
  %r = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<2xf32>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.scan' op expect same element type for block argument at index: 0 and 1 but got: 'f32' and 'f16'}}
  %r = scan %v dim=0 reverse=false identities=[0.0 : f32] : tile<4xf32> -> tile<4xf32>
  (%a: tile<f32>, %b: tile<f16>) {
    yield %a : tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op expect same type for operand at index: 0 and block argument at index: 0 but got: 'f32' and 'i32'}}
  %r = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  (%a: tile<i32>, %b: tile<i32>) {
    yield %a : tile<i32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.scan' op expect number of terminators operands (2) to match number of operands (1)}}
  %r = scan %v dim=0 reverse=true identities=[0.0 : f32] : tile<4xf32> -> tile<4xf32>
  (%a: tile<f32>, %b: tile<f32>) {
    yield %a, %b : tile<f32>, tile<f32>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op expect same type for operand at index: 0 and terminator argument at index: 0 but got: 'f32' and 'i1' (yield operand 0 must be tile<f32>, got tile<i1>)}}
  %r = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    %c = cmpf greater_than ordered %a, %b : tile<f32> -> tile<i1>
    yield %c : tile<i1>
  }
  return
}

// -----

entry @k() {
  %v = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  // expected-error@+1 {{'cuda_tile.reduce' op region #0 ('body') failed to verify constraint: region with 1 blocks (the combiner region has 0 blocks)}}
  %r = reduce %v dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>
  () {}
  return
}

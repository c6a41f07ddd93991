// What MLIR lets the text leave out: terminators of entries and of single-block regions, result
// names of ops whose results go unused, the dialect prefix of attributes given either way.
cuda_tile.module @implicit {
  cuda_tile.global @table <f32 : [1.0, 2.0]> : !cuda_tile.tile<2xf32>

  cuda_tile.entry @no_terminators(%flag: !cuda_tile.tile<i1>, %n: !cuda_tile.tile<i32>) {
    %zero = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %one = cuda_tile.constant <i32: 1> : !cuda_tile.tile<i32>
    cuda_tile.if %flag {
      cuda_tile.get_global @table : !cuda_tile.tile<!cuda_tile.ptr<f32>>
    }
    cuda_tile.for %i in (%zero to %n, step %one) : !cuda_tile.tile<i32> {
      cuda_tile.addi %i, %one : !cuda_tile.tile<i32>
    }
    %bounded = cuda_tile.assume #cuda_tile.bounded<0, ?>, %n : !cuda_tile.tile<i32>
    %aligned = cuda_tile.assume div_by<4>, %bounded : !cuda_tile.tile<i32>
  }

  cuda_tile.entry @empty() {}
}

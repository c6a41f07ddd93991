// gpu: sm_100
// Ops tileiras accepts only for Blackwell: block-scaled MMA and multicast (multimem) views.
cuda_tile.module @blackwell {
  cuda_tile.entry @scaled_mma(%a: !cuda_tile.tile<!cuda_tile.ptr<f8E4M3FN>>, %scales: !cuda_tile.tile<!cuda_tile.ptr<f8E8M0FNU>>,
                              %c: !cuda_tile.tile<!cuda_tile.ptr<f32>>) {
    %zero = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %av = cuda_tile.make_tensor_view %a, shape = [64, 64], strides = [64, 1] : !cuda_tile.tensor_view<64x64xf8E4M3FN, strides=[64,1]>
    %ap = cuda_tile.make_partition_view %av : !cuda_tile.partition_view<tile=(64x64), !cuda_tile.tensor_view<64x64xf8E4M3FN, strides=[64,1]>>
    %at, %at_tok = cuda_tile.load_view_tko weak %ap[%zero, %zero]
        : !cuda_tile.partition_view<tile=(64x64), !cuda_tile.tensor_view<64x64xf8E4M3FN, strides=[64,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<64x64xf8E4M3FN>, !cuda_tile.token
    %sv = cuda_tile.make_tensor_view %scales, shape = [128], strides = [1] : !cuda_tile.tensor_view<128xf8E8M0FNU, strides=[1]>
    %sp = cuda_tile.make_partition_view %sv : !cuda_tile.partition_view<tile=(128), !cuda_tile.tensor_view<128xf8E8M0FNU, strides=[1]>>
    %st, %st_tok = cuda_tile.load_view_tko weak %sp[%zero]
        : !cuda_tile.partition_view<tile=(128), !cuda_tile.tensor_view<128xf8E8M0FNU, strides=[1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<128xf8E8M0FNU>, !cuda_tile.token
    // One scale per 32 elements along K: lhs scales are 64x2, rhs scales 2x64.
    %lhs_scale = cuda_tile.reshape %st : !cuda_tile.tile<128xf8E8M0FNU> -> !cuda_tile.tile<64x2xf8E8M0FNU>
    %rhs_scale = cuda_tile.reshape %st : !cuda_tile.tile<128xf8E8M0FNU> -> !cuda_tile.tile<2x64xf8E8M0FNU>
    %acc = cuda_tile.constant <f32: 0.0> : !cuda_tile.tile<64x64xf32>
    %prod = cuda_tile.mmaf_scaled %at, %at, %acc, %lhs_scale, %rhs_scale
        : !cuda_tile.tile<64x64xf8E4M3FN>, !cuda_tile.tile<64x64xf8E4M3FN>, !cuda_tile.tile<64x64xf32>, !cuda_tile.tile<64x2xf8E8M0FNU>, !cuda_tile.tile<2x64xf8E8M0FNU>
    %cv = cuda_tile.make_tensor_view %c, shape = [64, 64], strides = [64, 1] : !cuda_tile.tensor_view<64x64xf32, strides=[64,1]>
    %cp = cuda_tile.make_partition_view %cv : !cuda_tile.partition_view<tile=(64x64), !cuda_tile.tensor_view<64x64xf32, strides=[64,1]>>
    %done = cuda_tile.store_view_tko weak %prod, %cp[%zero, %zero]
        : !cuda_tile.tile<64x64xf32>, !cuda_tile.partition_view<tile=(64x64), !cuda_tile.tensor_view<64x64xf32, strides=[64,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.token
    cuda_tile.return
  }

  cuda_tile.entry @multicast(%p: !cuda_tile.tile<!cuda_tile.ptr<f16, #cuda_tile.ptr_attr<multicast>>>) {
    %view = cuda_tile.make_tensor_view %p, shape = [128], strides = [1]
        : !cuda_tile.tile<!cuda_tile.ptr<f16, #cuda_tile.ptr_attr<multicast>>> -> !cuda_tile.tensor_view<128xf16, strides=[1], #cuda_tile.ptr_attr<multicast>>
    %parts = cuda_tile.make_partition_view %view
        : !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<128xf16, strides=[1], #cuda_tile.ptr_attr<multicast>>>
    %bx, %by, %bz = cuda_tile.get_tile_block_id : !cuda_tile.tile<i32>
    %sum, %sum_tok = cuda_tile.multimem_load_reduce_view_tko relaxed device %parts[%bx] attributes {reduction = #cuda_tile.multimem_reduction_kind<max>}
        : !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<128xf16, strides=[1], #cuda_tile.ptr_attr<multicast>>>, !cuda_tile.tile<i32>
        -> !cuda_tile.tile<32xf16>, !cuda_tile.token
    %reduced = cuda_tile.multimem_reduce_view_tko relaxed device %parts, %sum[%bx] token = %sum_tok
        : !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<128xf16, strides=[1], #cuda_tile.ptr_attr<multicast>>>, !cuda_tile.tile<32xf16>, !cuda_tile.tile<i32>, !cuda_tile.token
        -> !cuda_tile.token
    %stored = cuda_tile.multimem_store_view_tko weak %parts, %sum[%bx] token = %reduced
        : !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<128xf16, strides=[1], #cuda_tile.ptr_attr<multicast>>>, !cuda_tile.tile<32xf16>, !cuda_tile.tile<i32>, !cuda_tile.token
        -> !cuda_tile.token
    cuda_tile.return
  }
}

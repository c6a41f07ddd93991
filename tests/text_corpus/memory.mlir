// Views, tokens, pointer memory ops, control flow and reductions.
cuda_tile.module @memory {
  global private @counter <i32: [0]> : !cuda_tile.tile<1xi32>

  cuda_tile.entry @copy(%src: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %dst: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %n: !cuda_tile.tile<i32>) {
    %tok = cuda_tile.make_token : token
    %bx, %by, %bz = cuda_tile.get_tile_block_id : !cuda_tile.tile<i32>
    %gx, %gy, %gz = cuda_tile.get_num_tile_blocks : !cuda_tile.tile<i32>
    %one = cuda_tile.constant <i32: 1> : !cuda_tile.tile<i32>
    %sv = cuda_tile.make_tensor_view %src, shape = [%n], strides = [1] : !cuda_tile.tile<i32> -> !cuda_tile.tensor_view<?xf32, strides=[1]>
    %dv = cuda_tile.make_tensor_view %dst, shape = [128], strides = [1] : !cuda_tile.tensor_view<128xf32, strides=[1]>
    %dims = cuda_tile.get_tensor_shape %sv : !cuda_tile.tensor_view<?xf32, strides=[1]> -> !cuda_tile.tile<i32>
    %sp = cuda_tile.make_partition_view %sv : !cuda_tile.partition_view<tile=(32), tensor_view<?xf32, strides=[1]>>
    %dp = cuda_tile.make_partition_view %dv : !cuda_tile.partition_view<tile=(32), tensor_view<128xf32, strides=[1]>>
    %count = cuda_tile.get_index_space_shape %sp : !cuda_tile.partition_view<tile=(32), tensor_view<?xf32, strides=[1]>> -> !cuda_tile.tile<i32>
    %t, %t_tok = cuda_tile.load_view_tko weak %sp[%bx] token = %tok : !cuda_tile.partition_view<tile=(32), tensor_view<?xf32, strides=[1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<32xf32>, token
    %zero = cuda_tile.constant <f32: 0.0> : !cuda_tile.tile<32xf32>
    %sum = cuda_tile.for %i in (%one to %count, step %one) : !cuda_tile.tile<i32> iter_values(%acc = %zero) -> (!cuda_tile.tile<32xf32>) {
      %next = cuda_tile.addf %acc, %t : !cuda_tile.tile<32xf32>
      cuda_tile.continue %next : !cuda_tile.tile<32xf32>
    }
    %red = cuda_tile.reduce %sum dim=0 identities=[0.0 : f32] : !cuda_tile.tile<32xf32> -> !cuda_tile.tile<f32>
    (%l: !cuda_tile.tile<f32>, %r: !cuda_tile.tile<f32>) {
      %both = cuda_tile.addf %l, %r : !cuda_tile.tile<f32>
      cuda_tile.yield %both : !cuda_tile.tile<f32>
    }
    %scanned = cuda_tile.scan %sum dim=0 reverse=true identities=[0.0 : f32] : !cuda_tile.tile<32xf32> -> !cuda_tile.tile<32xf32>
    (%l: !cuda_tile.tile<f32>, %r: !cuda_tile.tile<f32>) {
      %both = cuda_tile.maxf %l, %r : !cuda_tile.tile<f32>
      cuda_tile.yield %both : !cuda_tile.tile<f32>
    }
    %st = cuda_tile.store_view_tko weak %scanned, %dp[%bx] token = %t_tok : !cuda_tile.tile<32xf32>, !cuda_tile.partition_view<tile=(32), tensor_view<128xf32, strides=[1]>>, !cuda_tile.tile<i32> -> token
    %joined = cuda_tile.join_tokens %tok, %st : token
    %g = cuda_tile.get_global @counter : !cuda_tile.tile<!cuda_tile.ptr<i32>>
    %old, %old_tok = cuda_tile.atomic_rmw_tko relaxed device %g, add, %one token=%joined : !cuda_tile.tile<!cuda_tile.ptr<i32>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<i32>, token
    %cas, %cas_tok = cuda_tile.atomic_cas_tko acq_rel device %g, %old, %one : !cuda_tile.tile<!cuda_tile.ptr<i32>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<i32>, token
    %is_zero = cuda_tile.cmpi equal %cas, %one, signed : !cuda_tile.tile<i32> -> !cuda_tile.tile<i1>
    %picked = cuda_tile.if %is_zero -> (!cuda_tile.tile<i32>) {
      cuda_tile.yield %one : !cuda_tile.tile<i32>
    } else {
      cuda_tile.yield %cas : !cuda_tile.tile<i32>
    }
    %printed = cuda_tile.print_tko "red=%f\0A", %red token=%cas_tok : !cuda_tile.tile<f32> -> token
    %w = cuda_tile.loop iter_values(%v = %picked) : !cuda_tile.tile<i32> -> !cuda_tile.tile<i32> {
      cuda_tile.break %v : !cuda_tile.tile<i32>
    }
    %r1 = cuda_tile.reshape %red : !cuda_tile.tile<f32> -> !cuda_tile.tile<1xf32>
    %b4 = cuda_tile.broadcast %r1 : !cuda_tile.tile<1xf32> -> !cuda_tile.tile<4xf32>
    %ids = cuda_tile.iota : !cuda_tile.tile<4xi32>
    %p0 = cuda_tile.reshape %src : !cuda_tile.tile<!cuda_tile.ptr<f32>> -> !cuda_tile.tile<1x!cuda_tile.ptr<f32>>
    %p4 = cuda_tile.broadcast %p0 : !cuda_tile.tile<1x!cuda_tile.ptr<f32>> -> !cuda_tile.tile<4x!cuda_tile.ptr<f32>>
    %ptrs = cuda_tile.offset %p4, %ids : !cuda_tile.tile<4x!cuda_tile.ptr<f32>>, !cuda_tile.tile<4xi32> -> !cuda_tile.tile<4x!cuda_tile.ptr<f32>>
    %vals, %vals_tok = cuda_tile.load_ptr_tko weak %ptrs : !cuda_tile.tile<4x!cuda_tile.ptr<f32>> -> !cuda_tile.tile<4xf32>, token
    %sum4 = cuda_tile.addf %vals, %b4 : !cuda_tile.tile<4xf32>
    %stored = cuda_tile.store_ptr_tko weak %ptrs, %sum4 token=%vals_tok : !cuda_tile.tile<4x!cuda_tile.ptr<f32>>, !cuda_tile.tile<4xf32> -> token
    %two = cuda_tile.cat %sum4, %sum4 dim = 0 : !cuda_tile.tile<4xf32>, !cuda_tile.tile<4xf32> -> !cuda_tile.tile<8xf32>
    %idx0 = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %part = cuda_tile.extract %two[%idx0] : !cuda_tile.tile<8xf32> -> !cuda_tile.tile<4xf32>
    %back = cuda_tile.insert %part, %two[%idx0] : !cuda_tile.tile<4xf32>, !cuda_tile.tile<8xf32>
    %sq = cuda_tile.reshape %back : !cuda_tile.tile<8xf32> -> !cuda_tile.tile<2x4xf32>
    %tr = cuda_tile.permute %sq [1, 0] : !cuda_tile.tile<2x4xf32> -> !cuda_tile.tile<4x2xf32>
    %asint = cuda_tile.ptr_to_int %src : !cuda_tile.tile<!cuda_tile.ptr<f32>> -> !cuda_tile.tile<i64>
    %asptr = cuda_tile.int_to_ptr %asint : !cuda_tile.tile<i64> -> !cuda_tile.tile<!cuda_tile.ptr<f32>>
    %half = cuda_tile.ptr_to_ptr %asptr : !cuda_tile.tile<!cuda_tile.ptr<f32>> -> !cuda_tile.tile<!cuda_tile.ptr<f16>>
    cuda_tile.return
  }
}

// Strided and gather/scatter views, view reductions, grid dependency control, stack memory,
// fences, byte packing and matrix multiply-accumulate, in the cuda_tile.-prefixed form.
cuda_tile.module @views {
  cuda_tile.entry @strided(%src: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %dst: !cuda_tile.tile<!cuda_tile.ptr<f32>>,
                           %rows: !cuda_tile.tile<i32>) {
    %start = cuda_tile.make_token : !cuda_tile.token
    // Wait for the grid we depend on before reading what it wrote.
    %ready = cuda_tile.gdc_wait_tko token = %start -> !cuda_tile.token
    %in = cuda_tile.make_tensor_view %src, shape = [%rows, 64], strides = [64, 1]
        : !cuda_tile.tile<i32> -> !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>
    %out = cuda_tile.make_tensor_view %dst, shape = [%rows, 64], strides = [64, 1]
        : !cuda_tile.tile<i32> -> !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>
    %windows = cuda_tile.make_strided_view %in
        : !cuda_tile.strided_view<tile=(16x16), traversal_strides=[8,16], padding_value = zero, !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>>
    %bx, %by, %bz = cuda_tile.get_tile_block_id : !cuda_tile.tile<i32>
    %zero = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %w, %w_tok = cuda_tile.load_view_tko weak %windows[%bx, %zero] token = %ready
        : !cuda_tile.strided_view<tile=(16x16), traversal_strides=[8,16], padding_value = zero, !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>>, !cuda_tile.tile<i32>
        -> !cuda_tile.tile<16x16xf32>, !cuda_tile.token
    %rows_of = cuda_tile.iota : !cuda_tile.tile<16xi32>
    %gather = cuda_tile.make_gather_scatter_view %in
        : !cuda_tile.gather_scatter_view<tile=(16x16), padding_value = zero, !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>
    %g, %g_tok = cuda_tile.load_view_tko weak %gather[%rows_of, %zero] token = %w_tok
        : !cuda_tile.gather_scatter_view<tile=(16x16), padding_value = zero, !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>, !cuda_tile.tile<16xi32>, !cuda_tile.tile<i32>
        -> !cuda_tile.tile<16x16xf32>, !cuda_tile.token
    %sum = cuda_tile.addf %w, %g : !cuda_tile.tile<16x16xf32>
    %scatter = cuda_tile.make_gather_scatter_view %out
        : !cuda_tile.gather_scatter_view<tile=(16x16), !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>
    %stored = cuda_tile.store_view_tko weak %sum, %scatter[%rows_of, %zero] token = %g_tok
        : !cuda_tile.tile<16x16xf32>, !cuda_tile.gather_scatter_view<tile=(16x16), !cuda_tile.tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>, !cuda_tile.tile<16xi32>, !cuda_tile.tile<i32>
        -> !cuda_tile.token
    // Let dependent grids start once our stores are issued.
    %released = cuda_tile.gdc_launch_dependents_tko token = %stored -> !cuda_tile.token
    cuda_tile.return
  }

  cuda_tile.entry @reduce_into(%counts: !cuda_tile.tile<!cuda_tile.ptr<i32>>, %n: !cuda_tile.tile<i32>) {
    %start = cuda_tile.make_token : !cuda_tile.token
    %view = cuda_tile.make_tensor_view %counts, shape = [%n], strides = [1]
        : !cuda_tile.tile<i32> -> !cuda_tile.tensor_view<?xi32, strides=[1]>
    %parts = cuda_tile.make_partition_view %view
        : !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<?xi32, strides=[1]>>
    %bx, %by, %bz = cuda_tile.get_tile_block_id : !cuda_tile.tile<i32>
    %ones = cuda_tile.constant <i32: 1> : !cuda_tile.tile<32xi32>
    %added = cuda_tile.atomic_red_view_tko relaxed device %parts[%bx], add, %ones token = %start
        : !cuda_tile.tile<32xi32>, !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<?xi32, strides=[1]>>, !cuda_tile.tile<i32>
        -> !cuda_tile.token
    %maxed = cuda_tile.atomic_red_view_tko relaxed device %parts[%bx], max, %ones token = %added
        : !cuda_tile.tile<32xi32>, !cuda_tile.partition_view<tile=(32), !cuda_tile.tensor_view<?xi32, strides=[1]>>, !cuda_tile.tile<i32>
        -> !cuda_tile.token
    // Order the view reductions against later accesses through other aliases.
    %fenced = cuda_tile.memory_fence_alias_tko %maxed
    cuda_tile.return
  }

  cuda_tile.entry @scratch(%dst: !cuda_tile.tile<!cuda_tile.ptr<f32>>) {
    %buffer = cuda_tile.alloca num_elem = 16, alignment = 16 : !cuda_tile.tile<!cuda_tile.ptr<f32>>
    %one = cuda_tile.constant <f32: 1.5> : !cuda_tile.tile<f32>
    %written = cuda_tile.store_ptr_tko weak %buffer, %one : !cuda_tile.tile<!cuda_tile.ptr<f32>>, !cuda_tile.tile<f32> -> !cuda_tile.token
    %back, %back_tok = cuda_tile.load_ptr_tko weak %buffer token=%written
        : !cuda_tile.tile<!cuda_tile.ptr<f32>> -> !cuda_tile.tile<f32>, !cuda_tile.token
    %done = cuda_tile.store_ptr_tko weak %dst, %back token=%back_tok : !cuda_tile.tile<!cuda_tile.ptr<f32>>, !cuda_tile.tile<f32> -> !cuda_tile.token
    cuda_tile.return
  }

  cuda_tile.entry @packing(%src: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %bytes: !cuda_tile.tile<!cuda_tile.ptr<i8>>) {
    %in = cuda_tile.make_tensor_view %src, shape = [64], strides = [1] : !cuda_tile.tensor_view<64xf32, strides=[1]>
    %in_parts = cuda_tile.make_partition_view %in : !cuda_tile.partition_view<tile=(64), !cuda_tile.tensor_view<64xf32, strides=[1]>>
    %out = cuda_tile.make_tensor_view %bytes, shape = [256], strides = [1] : !cuda_tile.tensor_view<256xi8, strides=[1]>
    %out_parts = cuda_tile.make_partition_view %out : !cuda_tile.partition_view<tile=(256), !cuda_tile.tensor_view<256xi8, strides=[1]>>
    %zero = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %values, %loaded = cuda_tile.load_view_tko weak %in_parts[%zero]
        : !cuda_tile.partition_view<tile=(64), !cuda_tile.tensor_view<64xf32, strides=[1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<64xf32>, !cuda_tile.token
    %packed = cuda_tile.pack %values : !cuda_tile.tile<64xf32> -> !cuda_tile.tile<256xi8>
    %unpacked = cuda_tile.unpack %packed : !cuda_tile.tile<256xi8> -> !cuda_tile.tile<64xf32>
    %repacked = cuda_tile.pack %unpacked : !cuda_tile.tile<64xf32> -> !cuda_tile.tile<256xi8>
    %stored = cuda_tile.store_view_tko weak %repacked, %out_parts[%zero] token = %loaded
        : !cuda_tile.tile<256xi8>, !cuda_tile.partition_view<tile=(256), !cuda_tile.tensor_view<256xi8, strides=[1]>>, !cuda_tile.tile<i32> -> !cuda_tile.token
    cuda_tile.return
  }

  cuda_tile.entry @matmul(%a: !cuda_tile.tile<!cuda_tile.ptr<f16>>, %b: !cuda_tile.tile<!cuda_tile.ptr<i8>>,
                          %c: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %d: !cuda_tile.tile<!cuda_tile.ptr<i32>>) {
    %zero = cuda_tile.constant <i32: 0> : !cuda_tile.tile<i32>
    %av = cuda_tile.make_tensor_view %a, shape = [32, 32], strides = [32, 1] : !cuda_tile.tensor_view<32x32xf16, strides=[32,1]>
    %ap = cuda_tile.make_partition_view %av : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xf16, strides=[32,1]>>
    %at, %at_tok = cuda_tile.load_view_tko weak %ap[%zero, %zero]
        : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xf16, strides=[32,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<32x32xf16>, !cuda_tile.token
    %facc = cuda_tile.constant <f32: 0.0> : !cuda_tile.tile<32x32xf32>
    %fprod = cuda_tile.mmaf %at, %at, %facc : !cuda_tile.tile<32x32xf16>, !cuda_tile.tile<32x32xf16>, !cuda_tile.tile<32x32xf32>
    %cv = cuda_tile.make_tensor_view %c, shape = [32, 32], strides = [32, 1] : !cuda_tile.tensor_view<32x32xf32, strides=[32,1]>
    %cp = cuda_tile.make_partition_view %cv : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xf32, strides=[32,1]>>
    %c_tok = cuda_tile.store_view_tko weak %fprod, %cp[%zero, %zero]
        : !cuda_tile.tile<32x32xf32>, !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xf32, strides=[32,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.token
    %bv = cuda_tile.make_tensor_view %b, shape = [32, 32], strides = [32, 1] : !cuda_tile.tensor_view<32x32xi8, strides=[32,1]>
    %bp = cuda_tile.make_partition_view %bv : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xi8, strides=[32,1]>>
    %bt, %bt_tok = cuda_tile.load_view_tko weak %bp[%zero, %zero]
        : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xi8, strides=[32,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.tile<32x32xi8>, !cuda_tile.token
    %iacc = cuda_tile.constant <i32: 0> : !cuda_tile.tile<32x32xi32>
    %iprod = cuda_tile.mmai %bt, %bt, %iacc signed unsigned : !cuda_tile.tile<32x32xi8>, !cuda_tile.tile<32x32xi8>, !cuda_tile.tile<32x32xi32>
    %dv = cuda_tile.make_tensor_view %d, shape = [32, 32], strides = [32, 1] : !cuda_tile.tensor_view<32x32xi32, strides=[32,1]>
    %dp = cuda_tile.make_partition_view %dv : !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xi32, strides=[32,1]>>
    %d_tok = cuda_tile.store_view_tko weak %iprod, %dp[%zero, %zero]
        : !cuda_tile.tile<32x32xi32>, !cuda_tile.partition_view<tile=(32x32), !cuda_tile.tensor_view<32x32xi32, strides=[32,1]>>, !cuda_tile.tile<i32> -> !cuda_tile.token
    cuda_tile.return
  }
}

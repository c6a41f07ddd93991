entry @float_math_Kt1_A1f32_1l0_A1f32_1l0_A1f32_1l0_I64(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<f32>>, %arg7: tile<i32>, %arg8: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_0 = assume bounded<0, ?>, %arg2 : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%assume], strides = [%assume_0] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %assume_1 = assume bounded<0, ?>, %arg4 : tile<i32>
  %assume_2 = assume bounded<0, ?>, %arg5 : tile<i32>
  %tview_3 = make_tensor_view %arg3, shape = [%assume_1], strides = [%assume_2] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %assume_4 = assume bounded<0, ?>, %arg7 : tile<i32>
  %assume_5 = assume bounded<0, ?>, %arg8 : tile<i32>
  %tview_6 = make_tensor_view %arg6, shape = [%assume_4], strides = [%assume_5] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %pview_7 = make_partition_view %tview_3 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tile_8, %result_token_9 = load_view_tko weak %pview_7[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %1 = addf %tile, %tile_8  : tile<64xf32>
  %cst_f32 = constant <f32: 5.000000e-01> : tile<f32>
  %reshape = reshape %cst_f32 : tile<f32> -> tile<1xf32>
  %bcast = broadcast %reshape : tile<1xf32> -> tile<64xf32>
  %2 = negf %tile : tile<64xf32>
  %3 = fma %2, %bcast, %1  : tile<64xf32>
  %cst_1_f32 = constant <f32: 1.000000e+00> : tile<f32>
  %reshape_10 = reshape %cst_1_f32 : tile<f32> -> tile<1xf32>
  %bcast_11 = broadcast %reshape_10 : tile<1xf32> -> tile<64xf32>
  %4 = addf %tile_8, %bcast_11  : tile<64xf32>
  %5 = divf %3, %4  : tile<64xf32>
  %6 = exp %tile  : tile<64xf32>
  %7 = addf %5, %6  : tile<64xf32>
  %8 = exp2 %tile_8 : tile<64xf32>
  %9 = addf %7, %8  : tile<64xf32>
  %10 = log %tile : tile<64xf32>
  %11 = addf %9, %10  : tile<64xf32>
  %12 = log2 %tile_8 : tile<64xf32>
  %13 = addf %11, %12  : tile<64xf32>
  %14 = sqrt %tile  : tile<64xf32>
  %15 = addf %13, %14  : tile<64xf32>
  %16 = rsqrt %tile_8 : tile<64xf32>
  %17 = addf %15, %16  : tile<64xf32>
  %18 = sin %tile : tile<64xf32>
  %19 = addf %17, %18  : tile<64xf32>
  %20 = cos %tile_8 : tile<64xf32>
  %21 = addf %19, %20  : tile<64xf32>
  %22 = tan %tile : tile<64xf32>
  %23 = addf %21, %22  : tile<64xf32>
  %24 = sinh %tile : tile<64xf32>
  %25 = addf %23, %24  : tile<64xf32>
  %26 = cosh %tile_8 : tile<64xf32>
  %27 = addf %25, %26  : tile<64xf32>
  %28 = tanh %tile  : tile<64xf32>
  %29 = addf %27, %28  : tile<64xf32>
  %30 = fpowf %tile, %tile_8 : tile<64xf32>
  %31 = addf %29, %30  : tile<64xf32>
  %32 = floor %tile : tile<64xf32>
  %33 = addf %31, %32  : tile<64xf32>
  %34 = ceil %tile_8 : tile<64xf32>
  %35 = addf %33, %34  : tile<64xf32>
  %36 = absf %tile : tile<64xf32>
  %37 = addf %35, %36  : tile<64xf32>
  %38 = negf %tile_8 : tile<64xf32>
  %39 = addf %37, %38  : tile<64xf32>
  %40 = remf %tile, %tile_8 : tile<64xf32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<64xf32>
  %41 = cmpf less_than ordered %40, %cst_0_f32 : tile<64xf32> -> tile<64xi1>
  %42 = cmpf less_than ordered %tile_8, %cst_0_f32 : tile<64xf32> -> tile<64xi1>
  %43 = xori %41, %42 : tile<64xi1>
  %44 = cmpf not_equal unordered %40, %cst_0_f32 : tile<64xf32> -> tile<64xi1>
  %45 = andi %43, %44 : tile<64xi1>
  %46 = addf %40, %tile_8  : tile<64xf32>
  %47 = select %45, %46, %40 : tile<64xi1>, tile<64xf32>
  %48 = addf %39, %47  : tile<64xf32>
  %49 = minf %tile, %tile_8 : tile<64xf32>
  %50 = addf %48, %49  : tile<64xf32>
  %51 = maxf %tile, %tile_8 : tile<64xf32>
  %52 = addf %50, %51  : tile<64xf32>
  %53 = fma %tile, %tile_8, %52  : tile<64xf32>
  %54 = cmpf not_equal unordered %53, %53 : tile<64xf32> -> tile<64xi1>
  %55 = select %54, %tile, %53 : tile<64xi1>, tile<64xf32>
  %pview_12 = make_partition_view %tview_6 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %56 = store_view_tko weak %55, %pview_12[%blockId_x] token = %0 : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}

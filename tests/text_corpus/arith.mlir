// Element-wise arithmetic, comparisons and conversions in the generic cuda_tile. form.
cuda_tile.module @arith {
  cuda_tile.entry @float_ops(%x: !cuda_tile.tile<f32>, %y: !cuda_tile.tile<f32>, %i: !cuda_tile.tile<i32>) {
    %a = cuda_tile.addf %x, %y rounding<zero> : !cuda_tile.tile<f32>
    %s = cuda_tile.subf %a, %y flush_to_zero : !cuda_tile.tile<f32>
    %m = cuda_tile.mulf %s, %x : !cuda_tile.tile<f32>
    %d = cuda_tile.divf %m, %y rounding<approx> : !cuda_tile.tile<f32>
    %f = cuda_tile.fma %d, %x, %y : !cuda_tile.tile<f32>
    %r = cuda_tile.remf %f, %y : !cuda_tile.tile<f32>
    %n = cuda_tile.negf %r : !cuda_tile.tile<f32>
    %b = cuda_tile.absf %n : !cuda_tile.tile<f32>
    %mx = cuda_tile.maxf %b, %x propagate_nan : !cuda_tile.tile<f32>
    %mn = cuda_tile.minf %mx, %y : !cuda_tile.tile<f32>
    %e = cuda_tile.exp %mn rounding<approx> : !cuda_tile.tile<f32>
    %e2 = cuda_tile.exp2 %e flush_to_zero : !cuda_tile.tile<f32>
    %l = cuda_tile.log %e2 : !cuda_tile.tile<f32>
    %l2 = cuda_tile.log2 %l : !cuda_tile.tile<f32>
    %q = cuda_tile.sqrt %l2 : !cuda_tile.tile<f32>
    %rq = cuda_tile.rsqrt %q : !cuda_tile.tile<f32>
    %sn = cuda_tile.sin %rq : !cuda_tile.tile<f32>
    %cs = cuda_tile.cos %sn : !cuda_tile.tile<f32>
    %tn = cuda_tile.tan %cs : !cuda_tile.tile<f32>
    %sh = cuda_tile.sinh %tn : !cuda_tile.tile<f32>
    %ch = cuda_tile.cosh %sh : !cuda_tile.tile<f32>
    %th = cuda_tile.tanh %ch rounding<approx> : !cuda_tile.tile<f32>
    %fl = cuda_tile.floor %th : !cuda_tile.tile<f32>
    %ce = cuda_tile.ceil %fl : !cuda_tile.tile<f32>
    %pw = cuda_tile.fpowf %ce, %x : !cuda_tile.tile<f32>
    %pi = cuda_tile.fpowi %pw, %i : !cuda_tile.tile<f32>, !cuda_tile.tile<i32>
    %at = cuda_tile.atan2 %pi, %y : !cuda_tile.tile<f32>
    %c = cuda_tile.cmpf less_than ordered %at, %x : !cuda_tile.tile<f32> -> !cuda_tile.tile<i1>
    %sel = cuda_tile.select %c, %at, %x : !cuda_tile.tile<i1>, !cuda_tile.tile<f32>
    %h = cuda_tile.ftof %sel : !cuda_tile.tile<f32> -> !cuda_tile.tile<f16>
    %k = cuda_tile.ftoi %x signed : !cuda_tile.tile<f32> -> !cuda_tile.tile<i32>
    %z = cuda_tile.itof %k unsigned : !cuda_tile.tile<i32> -> !cuda_tile.tile<f64>
    %bits = cuda_tile.bitcast %x : !cuda_tile.tile<f32> -> !cuda_tile.tile<i32>
    cuda_tile.return
  }

  cuda_tile.entry @int_ops(%x: !cuda_tile.tile<i32>, %y: !cuda_tile.tile<i32>) {
    %a = cuda_tile.addi %x, %y overflow<no_signed_wrap> : !cuda_tile.tile<i32>
    %s = cuda_tile.subi %a, %y : !cuda_tile.tile<i32>
    %m = cuda_tile.muli %s, %x : !cuda_tile.tile<i32>
    %hi = cuda_tile.mulhii %m, %x : !cuda_tile.tile<i32>
    %d = cuda_tile.divi %hi, %y unsigned rounding<positive_inf> : !cuda_tile.tile<i32>
    %r = cuda_tile.remi %d, %y signed : !cuda_tile.tile<i32>
    %mx = cuda_tile.maxi %r, %x signed : !cuda_tile.tile<i32>
    %mn = cuda_tile.mini %mx, %y unsigned : !cuda_tile.tile<i32>
    %ab = cuda_tile.absi %mn : !cuda_tile.tile<i32>
    %ng = cuda_tile.negi %ab : !cuda_tile.tile<i32>
    %an = cuda_tile.andi %ng, %x : !cuda_tile.tile<i32>
    %o = cuda_tile.ori %an, %y : !cuda_tile.tile<i32>
    %xo = cuda_tile.xori %o, %x : !cuda_tile.tile<i32>
    %sl = cuda_tile.shli %xo, %y : !cuda_tile.tile<i32>
    %sr = cuda_tile.shri %sl, %y unsigned : !cuda_tile.tile<i32>
    %c = cuda_tile.cmpi greater_than %sr, %x, signed : !cuda_tile.tile<i32> -> !cuda_tile.tile<i1>
    %w = cuda_tile.exti %sr signed : !cuda_tile.tile<i32> -> !cuda_tile.tile<i64>
    %t = cuda_tile.trunci %w : !cuda_tile.tile<i64> -> !cuda_tile.tile<i16>
    cuda_tile.assert %c, "x must be small" : !cuda_tile.tile<i1>
    %bound = cuda_tile.assume bounded<0, ?>, %x : !cuda_tile.tile<i32>
    cuda_tile.return
  }
}

@tessera.kernel(tile=(128,), shared=8 * 1024)
def group_sum(x: tessera.f32["n"], out: tessera.mut(tessera.f32["grid_groups"])):
    smem = tshared.alloc[tessera.f32](128)
    i = tile.linear_id()
    acc = 0.0
    for k in range(i, n, group_tile_count()):
        acc += x[k]
    smem[i] = acc
    tbarrier()
    if i == 0:
        out[group_linear_id()] = reduce_sum(smem)

@tessera.kernel
def scale(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i]

export TESSERA_CACHE_DIR=/tmp/tcache
$PYTHON -m pytest -q tests/python/test_jit_cuda.py -k "split_at_blocks or adjacent_columns or long_sums or storage_precision" -p no:cacheprovider 2>&1 | tail -3
$PYTHON bench/norm_gpu_bench.py --runs 5 --only chain 2>&1 | tail -3
for cfg in "TESSERA_COLUMN_PROLOGUE=1" "TESSERA_COLUMN_PROLOGUE=1 TESSERA_COLUMN_VECTOR=4" "TESSERA_COLUMN_PROLOGUE=1 TESSERA_COLUMN_VECTOR=1"; do
  echo "== $cfg"; env $cfg $PYTHON bench/norm_gpu_bench.py --runs 5 --only chain --no-compile 2>&1 | grep "^chain backward"
done
$PYTHON bench/reduce_gpu_bench.py --runs 10 2>&1 | grep "^column sums of"
$PYTHON bench/mlp_block_gpu_bench.py --runs 3 2>&1 | tail -8
TESSERA_COLUMN_BLOCKS=0 $PYTHON bench/mlp_block_gpu_bench.py --runs 3 2>&1 | tail -3

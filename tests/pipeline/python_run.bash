# Shared by python_package.sh and python_torch.sh (sourced; not a test itself: the CTest
# glob takes only *.sh): the tiny run they read, built once per test.

# make_python_run DIR: configs/tiny.yaml through shard_dataset (2 shard files, so that the
# package reads through the index's virtual datasets), pretrain (1 epoch), extract_features,
# reduce_dims and cluster_filter, one rank each (~6 s).
make_python_run() {
  local dir="$1" t sets=(--config "$CONFIG" --set run.dir="$1")
  mkdir -p "$dir"
  for t in shard_dataset pretrain extract_features reduce_dims cluster_filter; do
    case "$t" in
      shard_dataset) "$TOOLS/$t" "${sets[@]}" --set data.shards=2 ;;
      pretrain) "$TOOLS/$t" "${sets[@]}" --set pretrain.epochs=1 ;;
      *) "$TOOLS/$t" "${sets[@]}" ;;
    esac >>"$dir/make.log" 2>&1 || { tail -20 "$dir/make.log" >&2; fail "$t failed"; }
  done
  [ -e "$dir/dataset.shard-1.h5" ] || fail "no shard files: data.shards=2 ignored?"
}

# Sourced by bench/at_scale/run.sh, validate.sh and tests/bench/test_at_scale.sh: the platform
# generator and the smpirun wrapper. Needs OUT (output folder), SIM (at_scale_sim), LINK_LAT_US,
# BW_FACTOR, LAT_FACTOR.
die() { echo "at_scale: $*" >&2; exit 2; }
log() { echo "$(date +%T) $*" >&2; }

# platform P GBPS LAT_US: a fat-tree of P single-host nodes (one rank per node):
# one switch up to 32 nodes, above that 32-port leaves under 32 spines (full bisection).
platform() {
  local p=$1 topo f="$OUT/platforms/p$1-$2g-$3us.xml"
  if [ "$p" -le 32 ]; then topo="1;$p;1;1"; else topo="2;32,$((p / 32));1,32;1,1"; fi
  cat >"$f" <<XML
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="c" prefix="node-" suffix="" radical="0-$((p - 1))" speed="1Gf" bw="$2Gbps" lat="$3us"
           topology="FAT_TREE" topo_parameters="$topo"/>
</platform>
XML
  seq 0 $((p - 1)) | sed 's/^/node-/' >"$OUT/platforms/hosts-$p"
  echo "$f"
}

# smpi P PLATFORM ARGS...: at_scale_sim on P simulated ranks. The precautions of
# SMPI as this study uses it: the ompi collective selector (Open MPI's choices), no automatic
# benchmarking (compute is injected), no time charged per MPI_Test/Wtime/Iprobe, shared-malloc
# blocks as large as a buffer, the network factors set explicitly.
smpi() {
  local p=$1 plat=$2; shift 2
  timeout 1800 smpirun -platform "$plat" -hostfile "$OUT/platforms/hosts-$p" -np "$p" \
    --cfg=smpi/coll-selector:ompi --cfg=smpi/simulate-computation:no --cfg=smpi/test:0 --cfg=smpi/wtime:0 \
    --cfg=smpi/iprobe:0 --cfg=smpi/shared-malloc-blocksize:1073741824 --cfg=smpi/display-timing:no \
    --cfg=smpi/bw-factor:"0:${SMPI_BW_FACTOR:-$BW_FACTOR}" --cfg=smpi/lat-factor:"0:${SMPI_LAT_FACTOR:-$LAT_FACTOR}" \
    --cfg=network/crosstraffic:0 --log=root.thresh:warning "$SIM" "$@"
}


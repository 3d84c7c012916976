cd /work/wt/pretenure
run() { if [ $1 = on ]; then VOXGATE_GATEWAY_NODE_ARGS=--no-allocation-site-pretenuring "${@:2}"; else "${@:2}"; fi; }
for i in 3 4; do for on in off on; do
  echo "=== fleet-heap $on $i load $(cat /proc/loadavg) $(date -u +%T)"
  run $on nice -n 10 npx tsx bench/tools/fleet-heap.ts 1000 15 --dist --gc-nvp > /tmp/pt/fh-$on-$i.txt 2>&1; echo rc=$?
done; done
for i in 1 2; do for on in off on; do
  echo "=== fleet-cpu $on $i load $(cat /proc/loadavg) $(date -u +%T)"
  run $on nice -n 10 npx tsx bench/tools/fleet-cpu.ts 1000 3 --dist > /tmp/pt/fc-$on-$i.txt 2>&1; echo rc=$?
done; done

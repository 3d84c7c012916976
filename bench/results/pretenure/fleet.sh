cd /work/wt/pretenure
for i in 1 2; do
 for on in off on; do
  echo "=== fleet-heap $on $i load $(cat /proc/loadavg) $(date -u +%T)"
  if [ $on = on ]; then
   VOXGATE_GATEWAY_NODE_ARGS=--no-allocation-site-pretenuring nice -n 10 npx tsx bench/tools/fleet-heap.ts 1000 15 --dist --gc-nvp > /tmp/pt/fh-$on-$i.txt 2>&1
  else
   nice -n 10 npx tsx bench/tools/fleet-heap.ts 1000 15 --dist --gc-nvp > /tmp/pt/fh-$on-$i.txt 2>&1
  fi
  echo "rc=$? $(date -u +%T)"
 done
done

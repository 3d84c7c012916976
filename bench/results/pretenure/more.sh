cd /work/wt/pretenure
F=--gateway-arg=--no-allocation-site-pretenuring
for i in 3 4 5; do
 for m in "" "--mqtt"; do
  for on in off on; do
   a=""; [ $on = on ] && a=$F
   n=${m:-ws}; n=${n#--}
   echo "=== $n $on $i load $(cat /proc/loadavg)" 
   npx tsx bench/tools/one-device.ts 4 2 1 2 --devices=100 --gc-nvp --setup-burst $m $a > /tmp/pt/c1-$n-$on-$i.txt 2>&1
   echo "rc=$? $(date -u +%T)"
  done
 done
done
for m in "" "--mqtt"; do
  for on in off on; do
   a=""; [ $on = on ] && a=$F
   n=${m:-ws}; n=${n#--}
   echo "=== c64 $n $on load $(cat /proc/loadavg)" 
   npx tsx bench/tools/one-device.ts 4 2 64 2 --devices=100 --gc-nvp --setup-burst $m $a > /tmp/pt/c64-$n-$on.txt 2>&1
   echo "rc=$? $(date -u +%T)"
  done
done

cd /work/wt/pretenure
while pgrep -f 'bash /tmp/pt/more.sh' >/dev/null; do sleep 5; done
for on in off on; do
  echo "=== voice $on load $(cat /proc/loadavg) $(date -u +%T)"
  if [ $on = on ]; then VC_GATEWAY_ARGS=--no-allocation-site-pretenuring timeout 240 npx tsx bench/tools/voice-cpu.ts 3 4 ws --dist --paced-only --devices=100 > /tmp/pt/v-$on.txt 2>&1
  else timeout 240 npx tsx bench/tools/voice-cpu.ts 3 4 ws --dist --paced-only --devices=100 > /tmp/pt/v-$on.txt 2>&1; fi
  echo rc=$? $(date -u +%T)
done

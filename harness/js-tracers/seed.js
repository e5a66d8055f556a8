// The seed's incident as a Node.js service on kafkajs, traced by the real
// dd-trace with Data Streams Monitoring on (DD_DATA_STREAMS_ENABLED=true,
// DD_TRACE_AGENT_URL: streamsight's intake).
//
// usage: node seed.js BOOTSTRAP ORDERS GROUP
//
// Produces 1000 records to ORDERS (partition 0), prints "produced 1000"; a
// consumer, a live member of GROUP, reads ORDERS up to offset 500, commits 500
// and stays there (paused), committing 500 again every second: prints "stuck
// 500". Then, on stdin, "fail": every 200 ms a record larger than the topic's
// max.message.bytes (the broker refuses it), printing "failing" at the first
// refusal; "recover": small records again, printing "recovered OFFSET" at the
// first success; "close" (or the end of input): disconnects and prints "closed".
'use strict';
const tracer = require('dd-trace').init();
const { Kafka, logLevel } = require('kafkajs');
const readline = require('readline');

const [bootstrap, orders, group] = process.argv.slice(2);

async function main() {
  const kafka = new Kafka({ clientId: 'seed-js', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } });
  await producer.connect();
  for (let i = 0; i < 1000; i += 100) {
    const messages = [];
    for (let j = i; j < i + 100; j++) messages.push({ partition: 0, value: `order ${j}` });
    await producer.send({ topic: orders, acks: -1, messages });
  }
  console.log('produced 1000');

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: orders, fromBeginning: true });
  let resolveStuck;
  const stuck = new Promise((resolve) => { resolveStuck = resolve; });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message, pause }) => {
      if (Number(message.offset) >= 499) {
        pause();
        resolveStuck();
      }
    },
  });
  await stuck;
  const commit = () => consumer.commitOffsets([{ topic: orders, partition: 0, offset: '500' }]);
  await commit();
  console.log('stuck 500');

  let mode = 'steady';
  let saidFailing = false;
  let saidRecovered = false;
  const tooLarge = Buffer.alloc(256 * 1024);
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => { mode = line.trim(); });
  lines.on('close', () => { mode = 'close'; });
  let last = Date.now();
  while (mode !== 'close') {
    if (Date.now() - last >= 1000) {
      await commit().catch(() => {});
      last = Date.now();
    }
    if (mode === 'fail') {
      await producer.send({ topic: orders, acks: -1, messages: [{ partition: 0, value: tooLarge }] }).catch((e) => {
        if (!saidFailing) {
          saidFailing = true;
          console.log(`failing ${e.name}`);
        }
      });
    } else if (mode === 'recover') {
      const [meta] = await producer.send({ topic: orders, acks: -1, messages: [{ partition: 0, value: 'again' }] });
      if (!saidRecovered) {
        saidRecovered = true;
        console.log(`recovered ${meta.baseOffset}`);
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await consumer.disconnect();
  await producer.disconnect();
  console.log('closed');
  process.exit(0);
}

main().catch((e) => {
  console.error('seed:', e);
  process.exit(1);
});

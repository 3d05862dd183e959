// Contender (d) of the bench (bench/node.go): the consumer a typical
// e-commerce case study writes with Node.js, kafkajs's eachMessage and
// ioredis's defineCommand. It is deliberately not tuned: its Redis work is
// exactly (c)'s (bench/naive.go), so what differs is the stack and its defaults.
//
// Settings come from the environment (bench/node.go sets them):
//   FRAUDWATCH_NODE_BROKERS  host:port,...     FRAUDWATCH_NODE_REDIS_ADDR  host:port
//   FRAUDWATCH_NODE_GROUP    consumer group    FRAUDWATCH_NODE_PREFIX      key prefix
//   FRAUDWATCH_NODE_TOPICS   topic,...         FRAUDWATCH_NODE_EVENTS      messages to process
//   FRAUDWATCH_NODE_INCR_SCRIPT, FRAUDWATCH_NODE_REFUND_SCRIPT   (c)'s two scripts
// It prints one line, `events_per_sec <n>`, to stdout; everything else,
// kafkajs's logs included, goes to stderr, so that line is all the bench reads.
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const Redis = require('ioredis');

function setting(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

// kafkajs logs to stdout by default; stdout is reserved for the result.
const toStderr = () => ({ namespace, level, label, log }) => {
  const { message, ...extra } = log;
  process.stderr.write(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`);
};

async function main() {
  const brokers = setting('FRAUDWATCH_NODE_BROKERS').split(',');
  const topics = setting('FRAUDWATCH_NODE_TOPICS').split(',');
  const groupId = setting('FRAUDWATCH_NODE_GROUP');
  const prefix = setting('FRAUDWATCH_NODE_PREFIX');
  const n = Number(setting('FRAUDWATCH_NODE_EVENTS'));
  if (!Number.isInteger(n) || n < 2) throw new Error(`FRAUDWATCH_NODE_EVENTS must be an integer >= 2, not ${n}`);

  const redis = new Redis(`redis://${setting('FRAUDWATCH_NODE_REDIS_ADDR')}`);
  // defineCommand sends EVALSHA and falls back to EVAL once, as the case study does.
  // The scripts are (c)'s, handed over by bench/node.go, so that Redis does the
  // same work under the same SHA1.
  redis.defineCommand('incrAndCheck', { numberOfKeys: 1, lua: setting('FRAUDWATCH_NODE_INCR_SCRIPT') });
  redis.defineCommand('refundAmount', { numberOfKeys: 1, lua: setting('FRAUDWATCH_NODE_REFUND_SCRIPT') });

  const kafka = new Kafka({ clientId: 'fraudwatch-bench-node', brokers, logLevel: logLevel.WARN, logCreator: toStderr });
  const consumer = kafka.consumer({ groupId });

  let seen = 0;
  let failed = false;
  let start = 0n;
  let end = 0n;
  let finish, fail;
  const done = new Promise((resolve, reject) => { finish = resolve; fail = reject; });

  // A consumer that crashes for good (e.g. the broker refuses it) must not leave us waiting.
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (!payload.restart) fail(payload.error);
  });
  await consumer.connect();
  await consumer.subscribe({ topics, fromBeginning: true });
  // The defaults on purpose: one partition at a time, autoCommit (kafkajs
  // commits after each fetched batch, not after each message).
  await consumer.run({
    eachMessage: async ({ message }) => {
      // Messages kafkajs hands over after the Nth (or a failure), before it stops, are not ours.
      if (seen >= n || failed) return;
      if (seen === 0) start = process.hrtime.bigint();
      try {
        const ev = JSON.parse(message.value.toString());
        if (ev.type === 'refund') {
          await redis.refundAmount(`${prefix}:amount:{${ev.customer_id}}`, ev.amount);
        } else {
          // One awaited call per rule, as in (c): the round trips are the point.
          await redis.incrAndCheck(`${prefix}:count:{${ev.customer_id}}`, 1, 600, 20);
          await redis.incrAndCheck(`${prefix}:amount:{${ev.customer_id}}`, ev.amount, 600, 2000000);
          await redis.incrAndCheck(`${prefix}:card:{${ev.card_fingerprint}}`, 1, 600, 35);
          await redis.incrAndCheck(`${prefix}:ip:{${ev.ip}}`, 1, 600, 12);
        }
      } catch (err) {
        // Not rethrown: kafkajs would retry the message and count it twice in Redis.
        failed = true;
        fail(err);
        return;
      }
      seen++;
      if (seen === n) {
        end = process.hrtime.bigint();
        finish();
      }
    },
  });

  // On failure main rejects here and the process exits at once: the group is
  // the bench's alone, and a clean goodbye to a broken Redis could hang.
  await done;
  // disconnect waits for eachMessage to return, so it cannot be called from inside it.
  await consumer.disconnect();
  await redis.quit();
  // Same measure as (c): from the first message taken to the Nth processed.
  const seconds = Number(end - start) / 1e9;
  return (n - 1) / seconds;
}

main().then(
  (rate) => process.stdout.write(`events_per_sec ${rate.toFixed(1)}\n`, () => process.exit(0)),
  (err) => {
    process.stderr.write(`node consumer: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);

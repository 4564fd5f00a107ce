'use strict'
// Confluent's @confluentinc/kafka-javascript (the version in package.json: librdkafka underneath,
// driven through its KafkaJS-style promise API) against a Kafka-protocol broker.
//
//   node confluent.js --brokers host:port[,...] --scenarios roundtrip,idempotent,txn,group,admin
//                     [--prefix p] [--rf n] [--records n] [--timeout s] [-v]
//
// Same command line and report as kafkajs.js (lib/scen.js).  librdkafka does the protocol, the
// batching, the compression (every codec), the idempotent and transactional producer and the
// consumer group (its own assignors, eager and cooperative).
const RdKafka = require('@confluentinc/kafka-javascript')
const { Kafka, CompressionTypes, PartitionAssigners, logLevel } = RdKafka.KafkaJS
const scen = require('./lib/scen')

const opts = scen.parseArgs(process.argv.slice(2))
// the client's default logger writes to the console: stdout is the report's, so it goes to stderr
for (const level of ['log', 'info', 'debug', 'warn', 'error']) {
  console[level] = (...a) => process.stderr.write(require('util').format(...a) + '\n')
}
const log = (fmt, ...a) => process.stderr.write(require('util').format(new Date().toISOString() + ' confluent ' + fmt, ...a) + '\n')

// One Kafka object per connection: the run's (--brokers, plaintext) and, in the secure scenario,
// one per connection case (librdkafka's security settings beside the kafkaJS block)
const makeKafka = (brokers, rdkafka = {}) => new Kafka({ kafkaJS: { clientId: 'pykbroker-compat-confluent', brokers: brokers.split(','),
  logLevel: process.env.PYKBROKER_RDKAFKA_DEBUG ? logLevel.DEBUG : opts.verbose ? logLevel.INFO : logLevel.WARN }, ...rdkafka })
const kafka = makeKafka(opts.brokers)

// librdkafka: send each batch at once (await per send), metadata refreshed quickly after changes
const PRODUCER = { 'linger.ms': 5, 'topic.metadata.refresh.interval.ms': 1000 }
const CONSUMER = { 'topic.metadata.refresh.interval.ms': 1000, 'fetch.wait.max.ms': 100 }

const withAdmin = fn => scen.withAdmin(kafka, fn)
const topicProducer = (topic, config, k = kafka) => scen.topicProducer(k, createTopic, topic, config)

async function createTopic(admin, topic, partitions) {
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: opts.rf }] })
  await scen.until(async () => {
    try {
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      return md[0].partitions.length === partitions && md[0].partitions.every(p => p.leader >= 0)
    } catch (e) {
      return false
    }
  }, 20000, topic + ' with leaders')
}

// Read every partition of topic from the start until `expected` records came, then 300 ms more
// (anything beyond expected is reported, not waited for).  {partition: [message, ...]}.
async function readAll(topic, expected, { readUncommitted = false, ms = 30000, k = kafka } = {}) {
  const got = {}
  let n = 0
  const consumer = k.consumer({ kafkaJS: { groupId: `${opts.prefix}-read-${Math.random().toString(16).slice(2)}`,
    fromBeginning: true, autoCommit: false, readUncommitted }, ...CONSUMER })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic] })
  await consumer.run({ eachMessage: async ({ partition, message }) => {
    (got[partition] = got[partition] || []).push(message)
    n++
  } })
  try {
    await scen.until(() => n >= expected, ms, `${expected} records of ${topic} (have ${n})`)
    await scen.sleep(300)
  } finally {
    await consumer.disconnect()
  }
  for (const p of Object.keys(got)) got[p].sort((a, b) => Number(a.offset) - Number(b.offset))
  return got
}

// --- roundtrip: the shared data set with every codec, read back byte-exact ---------------------
async function roundtrip() {
  return scen.roundtrips(scen.CODEC_SET, opts, async (name, topic, want) => {
    const type = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.SNAPPY,
      lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }[name]
    const producer = await topicProducer(topic, { kafkaJS: { compression: type, acks: -1, allowAutoTopicCreation: false }, ...PRODUCER })
    const wantByPart = { 0: [], 1: [], 2: [] }
    const reported = { 0: [], 1: [], 2: [] }
    // one send per record, all awaited together: librdkafka batches them (in order per partition)
    const results = await Promise.all(want.map(r => producer.send({ topic, messages: [{ partition: r.partition,
      key: r.key, value: r.value, timestamp: String(r.timestamp), headers: scen.headerObject(r.headers) }] })))
    await producer.disconnect()
    results.forEach((meta, i) => reported[want[i].partition].push(Number(meta[0].offset !== undefined ? meta[0].offset : meta[0].baseOffset)))
    for (const r of want) wantByPart[r.partition].push(Object.assign({}, r, { offset: reported[r.partition][wantByPart[r.partition].length] }))
    const msgs = await readAll(topic, want.length)
    const got = {}
    for (const p of Object.keys(msgs)) {
      got[p] = msgs[p].map(m => ({ offset: Number(m.offset), key: m.key === undefined ? null : m.key,
        value: m.value === undefined ? null : m.value, timestamp: Number(m.timestamp), headers: scen.headerList(m.headers) }))
    }
    // this client's KafkaJS API sends an empty key or value as null (stored so: a client
    // behaviour, README.md): only the bytes are compared there
    const res = scen.judge(wantByPart, got, { nullVsEmptyKey: false, nullVsEmptyValue: false })
    res.offsets_dense = Object.values(reported).every(offs => offs.every((o, j) => o === j))
    return res
  })
}

// --- idempotent: librdkafka's idempotent producer, every record once, in order ---------------
async function idempotent() {
  const topic = `${opts.prefix}-idem`
  const n = opts.records * 10
  const producer = await topicProducer(topic, { kafkaJS: { idempotent: true, allowAutoTopicCreation: false }, ...PRODUCER })
  // every record sent without waiting for the one before: up to 5 requests in flight per
  // partition, librdkafka's sequence numbers keep them in order
  const sends = []
  for (let i = 0; i < n; i++) sends.push(producer.send({ topic, messages: [{ partition: i % 3, value: `idem-${i}` }] }))
  await Promise.all(sends)
  await producer.disconnect()
  const msgs = await readAll(topic, n)
  const res = { produced: n, read: 0, duplicates: 0, missing: 0, out_of_order: 0, offset_errors: 0 }
  return scen.judgeIdempotent(res, msgs, n)
}

// --- txn: transactions committed (visible to read_committed) and aborted (invisible) -----------
async function txn() {
  const topic = `${opts.prefix}-txn`
  const producer = await topicProducer(topic, { kafkaJS: { transactionalId: `${opts.prefix}-txn-id`, allowAutoTopicCreation: false },
    ...PRODUCER })
  await scen.txnRounds(producer, topic)
  await producer.disconnect()
  return { read_committed: scen.countTags(await readAll(topic, 90)),
    read_uncommitted: scen.countTags(await readAll(topic, 150, { readUncommitted: true })) }
}

// --- group: two members rebalancing, committed offsets resumed after a restart -----------------
// As kafkajs.js's group scenario, once per librdkafka assignor: roundRobin (eager) and
// cooperativeSticky (incremental rebalances: a member gives up only the partitions that move).
// Commits are explicit (commitOffsets after every 5 records processed); a member's partitions
// after every assignment and the partitions of every revocation are reported.
async function group() {
  const out = {}
  for (const assignor of ['roundRobin', 'cooperativeSticky']) out[assignor] = await groupWith(assignor)
  return out
}

async function groupWith(assignor) {
  const topic = `${opts.prefix}-grp-${assignor}`
  const groupId = `${topic}-g`
  const n = opts.records
  const p = await topicProducer(topic, { kafkaJS: { allowAutoTopicCreation: false }, ...PRODUCER })
  const all = scen.groupValues(n)
  await Promise.all(all.map((v, i) => p.send({ topic, messages: [{ partition: i % 3, value: v }] })))
  await p.disconnect()
  const seen = new Map()
  const res = { produced: n, problems: [], members: {} }
  const t0 = Date.now()

  // limit: at most this many records of each partition (0: no limit)
  const member = async (name, limit, pace) => {
    const info = { processed: 0, per: {}, assignments: [], revoked: [], events: [] }
    res.members[name] = info
    let owned = []
    const consumer = kafka.consumer({
      kafkaJS: { groupId, fromBeginning: true, autoCommit: false, sessionTimeout: 10000, heartbeatInterval: 300,
        partitionAssigners: [PartitionAssigners[assignor]] },
      ...CONSUMER,
      // PYKBROKER_RDKAFKA_DEBUG=cgrp,fetch,...: librdkafka's debug contexts for the group members
      ...(process.env.PYKBROKER_RDKAFKA_DEBUG ? { debug: process.env.PYKBROKER_RDKAFKA_DEBUG } : {}),
      rebalance_cb: (err, assignment) => {
        const parts = assignment.map(tp => tp.partition)
        if (err.code === -175) {      // ERR__ASSIGN_PARTITIONS
          owned = assignor === 'cooperativeSticky' ? owned.concat(parts) : parts
          info.assignments.push(owned.slice().sort())
          info.events.push(['assign', parts, Date.now() - t0, info.processed])
        } else {                      // ERR__REVOKE_PARTITIONS
          info.revoked.push(parts.slice().sort())
          info.events.push(['revoke', parts, Date.now() - t0, info.processed])
          owned = assignor === 'cooperativeSticky' ? owned.filter(x => !parts.includes(x)) : []
        }
      },
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic] })
    await consumer.run({
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => scen.processBatch(batch,
        { isRunning, isStale, resolveOffset }, { info, limit, seen, res, name },
        next => consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }]),
        async () => { if (pace) await scen.sleep(pace()) }),
    })
    return { info, stopWhen: async cond => {
      await scen.until(cond, 60000, name + ' processing')
      await consumer.disconnect()
    } }
  }
  const total = () => seen.size
  // A: a third of each partition, so that each has records left for B and C
  const share = Math.floor(n / 9)
  const a = await member('A', share, () => 0)
  await a.stopWhen(() => a.info.processed >= 3 * share)
  const committed = async () => withAdmin(async admin => {
    const c = await admin.fetchOffsets({ groupId, topics: [topic] })
    const o = {}
    for (const q of c[0].partitions) o[q.partition] = Number(q.offset)
    return o
  })
  res.committed_by_first = Object.values(await committed()).reduce((s, x) => s + Math.max(0, x), 0)
  // B works slowly until C has processed records (the rebalance, two rounds with
  // cooperative-sticky, lands while B still has records to process), then both at full speed
  let cWorking = () => false
  const slowUntilC = () => cWorking() ? 0 : 150
  const b = await member('B', 0, slowUntilC)
  await scen.until(() => b.info.assignments.length >= 1 && b.info.processed > 0, 30000, 'B consuming')
  const c = await member('C', 0, () => 0)
  cWorking = () => c.info.processed > 0
  await Promise.all([b.stopWhen(() => total() >= n), c.stopWhen(() => total() >= n)])
  scen.tally(res, all, seen)
  const ends = await withAdmin(admin => admin.fetchTopicOffsets(topic))
  const cm = await committed()
  res.committed_at_end = ends.every(e => cm[e.partition] === Number(e.high))
  return res
}

// --- secure: TLS, mutual TLS and SASL (PLAIN, SCRAM) connection cases --------------------------
// As kafkajs.js's: each case of --security with a Kafka object of its own (librdkafka's
// security.protocol, ssl.ca.location, ssl.certificate/key.location, sasl.mechanism /
// username / password), all at once.  "ok": a topic created through the case's connection, the
// 30 records produced (acks -1) and read back byte-exact at the offsets the delivery reports
// named.  "auth-error": a producer connecting and sending one record to the case's topic; the
// error the client raised (class name, code, type, message) reported.
const SECURE_RECORDS = 30

function rdkafkaSecurity(c) {
  const o = { 'security.protocol': (c.sasl ? 'SASL_' : '') + (c.ssl ? 'SSL' : 'PLAINTEXT') }
  if (c.ssl) {
    o['ssl.ca.location'] = c.ssl.ca
    if (c.ssl.cert) Object.assign(o, { 'ssl.certificate.location': c.ssl.cert, 'ssl.key.location': c.ssl.key })
  }
  if (c.sasl) Object.assign(o, { 'sasl.mechanism': c.sasl.mechanism.toUpperCase(), 'sasl.username': c.sasl.username,
    'sasl.password': c.sasl.password })
  return o
}

async function secureCase(c) {
  if (c.expect === 'auth-error') {
    // librdkafka reports a refused authentication in its log at once ("SASL authentication
    // error: <the broker's message>", facility FAIL) and fails the connect when its first
    // metadata request times out (ERR__TRANSPORT).  The KafkaJS-style connect() waits 30 s for
    // that metadata and cannot be given less, and a producer still connecting holds the process
    // open that long: this case uses the client's other API (the same librdkafka producer,
    // callbacks), whose connect takes a timeout (README.md).  A send follows a connect that
    // succeeded.
    const producer = new RdKafka.Producer(Object.assign({ 'bootstrap.servers': c.brokers, 'client.id': 'pykbroker-compat-confluent',
      'message.timeout.ms': 5000, 'acks': -1, 'dr_cb': true }, rdkafkaSecurity(c)))
    // refused_after_ms: from the connect to librdkafka's first authentication failure logged
    // (the connect itself always waits its 3 s timeout for the metadata that never comes)
    const res = { connected: false, sent: null, connect_error: null, failures_logged: [], refused_after_ms: null }
    const t0 = Date.now()
    producer.on('event.log', m => {
      process.stderr.write(`rdkafka ${m.fac} ${m.message}\n`)
      if (m.fac === 'FAIL' && /authentication/i.test(m.message)) {
        if (res.refused_after_ms === null) res.refused_after_ms = Date.now() - t0
        res.failures_logged.push(m.message)
      }
    })
    await new Promise(resolve => producer.connect({ timeout: 3000 }, err => {
      if (err) res.connect_error = { code: err.code, message: err.message }
      else res.connected = true
      resolve()
    }))
    if (res.connected) {
      res.sent = await new Promise(resolve => {
        producer.on('delivery-report', (err, r) => resolve(err ? 'error ' + err.code : 'offset ' + r.offset))
        producer.setPollInterval(50)
        producer.produce(c.topic, 0, Buffer.from('must-not-be-written'))
      })
      await new Promise(resolve => producer.disconnect(resolve))
    }
    return res
  }
  const k = makeKafka(c.brokers, rdkafkaSecurity(c))
  const topic = `${opts.prefix}-sec-${c.name}`
  const want = scen.secureRecords(SECURE_RECORDS, Date.now())
  const producer = await topicProducer(topic, { kafkaJS: { acks: -1, allowAutoTopicCreation: false }, ...PRODUCER }, k)
  const results = await Promise.all(want.map(r => producer.send({ topic, messages: [{ partition: r.partition,
    key: r.key, value: r.value, timestamp: String(r.timestamp), headers: scen.headerObject(r.headers) }] })))
  await producer.disconnect()
  const wantByPart = { 0: [], 1: [], 2: [] }
  results.forEach((meta, i) => wantByPart[want[i].partition].push(Object.assign({}, want[i], { offset: Number(meta[0].offset !== undefined ? meta[0].offset : meta[0].baseOffset) })))
  for (const p of Object.keys(wantByPart)) wantByPart[p].sort((a, b) => a.offset - b.offset)
  const msgs = await readAll(topic, want.length, { k })
  const got = {}
  for (const p of Object.keys(msgs)) {
    got[p] = msgs[p].map(m => ({ offset: Number(m.offset), key: m.key === undefined ? null : m.key,
      value: m.value === undefined ? null : m.value, timestamp: Number(m.timestamp), headers: scen.headerList(m.headers) }))
  }
  const res = scen.judge(wantByPart, got, { nullVsEmptyKey: false, nullVsEmptyValue: false })
  // librdkafka keeps a partition's records in send order: the delivery reports' offsets are the
  // records' places
  res.offsets_dense = Object.values(wantByPart).every(rs => rs.every((r, j) => r.offset === j))
  res.topic = topic
  return res
}

const secure = () => scen.runSecurityCases(opts.security, secureCase)

// --- leaderkill: the idempotent producer while a partition leader is killed -9 -----------------
// As kafkajs.js's: tests/node kills partition 0's leader once "progress acked=N" on stderr
// passes a mark, and restarts it.  librdkafka's idempotent producer (enable.idempotence, acks
// all, up to 5 requests in flight per partition), one send per record without waiting, --pace
// ms after every 15; each record's offset from its delivery report.  Read back: every
// acknowledged record once, in produce order per partition, at its acknowledged offset.
async function leaderkill() {
  const topic = `${opts.prefix}-idem`
  const n = opts.records
  const producer = await topicProducer(topic, { kafkaJS: { idempotent: true, acks: -1, allowAutoTopicCreation: false }, ...PRODUCER })
  const order = { 0: [], 1: [], 2: [] }
  const acked = new Map()
  const gap = scen.ackGap()   // partition 0's acknowledgements
  const sends = []
  for (let i = 0; i < n; i++) {
    const value = `idem-${String(i).padStart(6, '0')}`
    order[i % 3].push(value)
    sends.push(producer.send({ topic, messages: [{ partition: i % 3, value }] }).then(meta => {
      acked.set(value, Number(meta[0].offset !== undefined ? meta[0].offset : meta[0].baseOffset))
      if (i % 3 === 0) gap.ack()
      if (acked.size % 100 === 0) process.stderr.write(`progress acked=${acked.size}\n`)
    }))
    if (opts.pace && i % 15 === 14) await scen.sleep(opts.pace)
  }
  await Promise.all(sends)
  await producer.disconnect()
  const msgs = await readAll(topic, n, { ms: 60000 })
  return { verdict: scen.judgeAcked(msgs, order, acked), partition0_longest_ack_gap_ms: gap.longest }
}

// --- admin: what the KafkaJS-style admin API of this client offers ------------------------------
async function adminScenario() {
  const topic = `${opts.prefix}-adm`
  const res = {}
  await withAdmin(async admin => {
    await createTopic(admin, topic, 2)
    try {
      res.created_again = await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: opts.rf }] })
    } catch (e) {
      res.created_again = 'error ' + (e.code !== undefined ? e.code : e.message)
    }
    res.listed = (await admin.listTopics()).includes(topic)
    const md = (await admin.fetchTopicMetadata({ topics: [topic] }))[0]
    res.metadata = md.partitions.map(q => [q.partitionId, q.replicas.length, q.isr.length, q.leader >= 0]).sort()
    const producer = kafka.producer({ kafkaJS: { allowAutoTopicCreation: false }, ...PRODUCER })
    await producer.connect()
    const t0 = Date.now() - 60000
    await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: 'v' + i, timestamp: String(t0 + i * 1000) })) })
    await producer.disconnect()
    const dr = await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
    res.delete_records = dr.map(q => [q.partition, Number(q.lowWatermark !== undefined ? q.lowWatermark : q.offset)])
    res.offsets = (await admin.fetchTopicOffsets(topic)).map(q => [q.partition, Number(q.low), Number(q.high)]).sort()
    res.offset_for_timestamp = (await admin.fetchTopicOffsetsByTimestamp(topic, t0 + 6500)).filter(q => q.partition === 0).map(q => Number(q.offset))[0]
    await admin.deleteTopics({ topics: [topic] })
    await scen.until(async () => !(await admin.listTopics()).includes(topic), 10000, topic + ' gone')
    res.listed_after_delete = false
  })
  return res
}

scen.runAll(opts, { roundtrip, idempotent, txn, group, admin: adminScenario, secure, leaderkill }, log)
  .then(() => process.exit(0), e => scen.fail('%s', e && e.stack || e))

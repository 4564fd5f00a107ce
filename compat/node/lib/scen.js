'use strict'
// What the Node client scenarios share: the command line, the deterministic records of the
// round-trip scenario (the data set of compat/go/internal/scen: keys null / empty / binary,
// values null / empty / binary / 6 KiB, headers with a duplicate key, an empty value, a
// non-ASCII key and a binary value, out-of-order CreateTime timestamps), the byte-exact
// comparison, the counting of record shapes, the flow of the roundtrip and txn scenarios (each
// client's own calls passed in), and the report: one JSON object on stdout, keyed by
// scenario, each value either that scenario's observations or {error: "..."} when the client
// failed in it (the other scenarios of the run still report).  Every client is judged on the
// same data and the same rules.

// --- command line: --brokers h:p[,h:p] --scenarios a,b --prefix p --rf n --records n -v -------
function parseArgs(argv, defaults) {
  const opts = Object.assign({ brokers: '127.0.0.1:9092', scenarios: '', prefix: 'node', rf: 1, records: 300,
    verbose: false, timeout: 120, security: '', pace: 0 }, defaults)
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '-v' || a === '--verbose') { opts.verbose = true; continue }
    const m = /^--?([a-z-]+)(?:=(.*))?$/.exec(a)
    if (!m) fail('bad argument %s', a)
    const name = m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase())
    const value = m[2] !== undefined ? m[2] : argv[++i]
    if (!(name in opts)) fail('unknown flag --%s', m[1])
    opts[name] = typeof opts[name] === 'number' ? Number(value) : value
  }
  opts.scenarios = opts.scenarios.split(',').filter(Boolean)
  return opts
}

// --- the secure scenario: its connection cases and what it writes -----------------------------
// --security FILE: {"cases": [case, ...]}; a case is {name, brokers, ssl?: {ca, cert?, key?},
// sasl?: {mechanism, username, password} or {mechanism: "oauthbearer", sub, lifetime_s},
// expect: "ok" | "auth-error", topic (auth-error: an existing topic the case must not write to)}.
function securityCases(file) {
  return JSON.parse(require('fs').readFileSync(file, 'utf8')).cases
}

// Runs every case of the security file at once through the client's secureCase; a case that
// throws is reported as { error: its stack } so the others' results still come back.
async function runSecurityCases(file, secureCase) {
  const out = {}
  await Promise.all(securityCases(file).map(async c => {
    try {
      out[c.name] = await secureCase(c)
    } catch (e) {
      out[c.name] = { error: String(e && e.stack || e) }
    }
  }))
  return out
}

// An unsecured JWT (alg "none", empty signature) as Kafka's OAuthBearerUnsecuredJws reads it:
// sub the principal, iat now, exp lifetime seconds later (a negative lifetime: already expired).
function unsecuredJwt(sub, lifetimeS = 3600) {
  const b64 = o => Buffer.from(JSON.stringify(o)).toString('base64url')
  const now = Math.floor(Date.now() / 1000)
  const iat = lifetimeS < 0 ? now + 2 * lifetimeS : now
  return b64({ alg: 'none' }) + '.' + b64({ sub, iat, exp: now + lifetimeS, scope: 'test' }) + '.'
}

// The records a secure case writes: the first n of the round-trip data set, partition 0..2.
function secureRecords(n, baseMs) {
  return Array.from({ length: n }, (_, i) => record(i, baseMs))
}

// --- the round-trip data set: record i (partition i % 3), as compat/go/internal/scen.Record ---
function record(i, baseMs) {
  const r = { partition: i % 3, key: null, value: null, headers: [] }
  if (i % 4 === 1) r.key = Buffer.alloc(0)
  else if (i % 4 > 1) r.key = Buffer.from([0x00, i & 0xff, 0xff, 0x6b])   // 00 i ff 'k'
  if (i % 50 === 7) {
    const unit = Buffer.from([i & 0xff, 0x00, 0xfe])
    r.value = Buffer.concat(Array(2048).fill(unit))                      // 6 KiB
  } else if (i % 9 === 3) r.value = null
  else if (i % 9 === 4) r.value = Buffer.alloc(0)
  else r.value = Buffer.concat([Buffer.from('value-' + i + '-'), Buffer.from([0x00, 0xff])])
  if (i % 3 !== 2) {
    r.headers = [['h', Buffer.from('first')], ['h', Buffer.from('second')],   // duplicate key, order kept
      ['empty', Buffer.alloc(0)], ['ключ', Buffer.from([0x00, 0x01, i & 0xff])]]
  }
  let ts = baseMs + i
  if (i % 2 === 1) ts -= 40000                                           // out of order in a partition
  r.timestamp = ts
  return r
}

const CODEC_SET = ['none', 'gzip', 'snappy', 'lz4', 'zstd']

// The roundtrip scenario: records 0..n-1 of the data set through one topic per codec,
// <prefix>-rt-<codec>; one(codec, topic, records) writes and reads them back and returns its
// verdict.  {codec: verdict, with its topic}.
async function roundtrips(codecs, { prefix, records }, one) {
  const out = {}
  const base = Date.now()
  const want = []
  for (let i = 0; i < records; i++) want.push(record(i, base))
  for (const codec of codecs) {
    const topic = `${prefix}-rt-${codec}`
    out[codec] = Object.assign(await one(codec, topic, want), { topic })
  }
  return out
}

// The data set's headers ([[key, value], ...]) as the KafkaJS API takes them: an object, a key seen
// twice an array of its values in order (kafkajs and Confluent's KafkaJS API alike).
function headerObject(list) {
  const o = {}
  for (const [k, v] of list) o[k] = k in o ? [].concat(o[k], [v]) : v
  return o
}

// Headers as the KafkaJS API hands them out (that object, keys in the order first seen; none:
// undefined) back to a list of [key, value].
function headerList(h) {
  const out = []
  for (const [k, v] of Object.entries(h || {})) {
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, one])
  }
  return out
}

// nullMatters false: a client that cannot tell null from empty (it says so in its flags) is only
// held to equal bytes
function sameBytes(a, b, nullMatters = true) {
  if (a === null || b === null) return nullMatters ? a === b : (a || Buffer.alloc(0)).length === (b || Buffer.alloc(0)).length
  return Buffer.compare(a, b) === 0
}

function show(b) {
  return b === null ? 'null' : JSON.stringify(b.toString('latin1'))
}

// '' when got (offset, key, value, timestamp, headers) is want, else what differs.  flags: which
// null/empty distinctions the client keeps ({nullVsEmptyKey, nullVsEmptyValue}, both by default).
const KEEPS_ALL = { nullVsEmptyKey: true, nullVsEmptyValue: true }
function compare(want, got, flags = KEEPS_ALL) {
  if (String(got.offset) !== String(want.offset)) return 'offset ' + got.offset + ' != ' + want.offset
  if (!sameBytes(want.key, got.key, flags.nullVsEmptyKey)) return 'key ' + show(got.key) + ' != ' + show(want.key)
  if (!sameBytes(want.value, got.value, flags.nullVsEmptyValue)) {
    return 'value of ' + (got.value ? got.value.length : 'null') + ' bytes != ' + (want.value ? want.value.length : 'null')
  }
  if (Number(got.timestamp) !== want.timestamp) return 'timestamp ' + got.timestamp + ' != ' + want.timestamp
  if (got.headers.length !== want.headers.length) return got.headers.length + ' headers != ' + want.headers.length
  for (let j = 0; j < want.headers.length; j++) {
    const [wk, wv] = want.headers[j]
    const [gk, gv] = got.headers[j]
    if (gk !== wk || !sameBytes(wv, gv)) return 'header ' + j + ' ' + gk + '=' + show(gv) + ' != ' + wk + '=' + show(wv)
  }
  return ''
}

// want, got: {partition: [records in offset order]}; records carry offset, key, value, timestamp,
// headers ([[key, value], ...]).  Compared per partition in order (flags: as compare); the shapes
// read back counted.
function judge(want, got, flags = KEEPS_ALL) {
  const res = { produced: 0, read: 0, mismatches: [], null_keys_read: 0, empty_keys_read: 0, null_values_read: 0,
    big_values_read: 0, headers_read: 0 }
  for (const part of Object.keys(want)) {
    const w = want[part]
    const g = got[part] || []
    res.produced += w.length
    for (let j = 0; j < w.length; j++) {
      if (j >= g.length) { res.mismatches.push('p' + part + ': only ' + g.length + ' of ' + w.length + ' records read'); break }
      const m = compare(w[j], g[j], flags)
      if (m && res.mismatches.length < 10) res.mismatches.push('p' + part + '[' + j + ']: ' + m)
    }
  }
  for (const part of Object.keys(got)) {
    for (const r of got[part]) {
      res.read++
      if (r.key === null) res.null_keys_read++
      else if (r.key.length === 0) res.empty_keys_read++
      if (r.value === null) res.null_values_read++
      else if (r.value.length === 6144) res.big_values_read++
      res.headers_read += r.headers.length
    }
  }
  return res
}

// --- running: each scenario in turn, its report or its error, one JSON line at the end --------
async function runAll(opts, scenarios, log) {
  const out = {}
  for (const name of opts.scenarios) {
    const fn = scenarios[name]
    if (!fn) fail('unknown scenario %s (have %s)', name, Object.keys(scenarios).join(', '))
    const t0 = Date.now()
    try {
      out[name] = await withTimeout(fn(opts), opts.timeout * 1000, name)
    } catch (e) {
      out[name] = { error: String(e && e.stack || e) }
    }
    log('scenario %s: %d ms%s', name, Date.now() - t0, out[name].error ? ' (error)' : '')
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

function withTimeout(promise, ms, what) {
  let timer
  return Promise.race([promise, new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(what + ': no result after ' + ms + ' ms')), ms)
  })]).finally(() => clearTimeout(timer))
}

function fail(format, ...args) {
  process.stderr.write(require('util').format(format, ...args) + '\n')
  process.exit(2)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// poll cond() every 50 ms until it is true or ms passed (then throw, naming what)
async function until(cond, ms, what) {
  const deadline = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('timed out after ' + ms + ' ms waiting for ' + what)
    await sleep(50)
  }
}

// --- the group scenario: member A processes a third, B and C share the rest ---------------------
// The values of the n records produced (their order is the produce order).
const groupValues = n => Array.from({ length: n }, (_, i) => `g-${String(i).padStart(5, '0')}`)

// The next chunk (at most 5 records from index s) of a fetched batch a member processes: at most
// limit records of each partition (0: no limit), counted in info (processed, per partition) and
// in seen (value -> times processed).  null once this partition's share is done.
function takeChunk(batch, s, info, limit, seen) {
  let chunk = batch.messages.slice(s, s + 5)
  const mine = info.per[batch.partition] || 0
  if (limit > 0) chunk = chunk.slice(0, limit - mine)
  if (chunk.length === 0) return null
  info.per[batch.partition] = mine + chunk.length
  for (const m of chunk) seen.set(m.value.toString(), (seen.get(m.value.toString()) || 0) + 1)
  info.processed += chunk.length
  return chunk
}

// The group scenario's member over one batch: chunks of 5 records (takeChunk), each resolved
// and its next offset committed with the client's own call (commit(offset as a string)); a
// commit that fails is one of the run's problems.  afterChunk: the client's pacing (and
// heartbeat).  Stops when the member is no longer running, its batch is stale, or its
// partition's share is done (nothing resolved then).
async function processBatch(batch, { isRunning, isStale, resolveOffset }, { info, limit, seen, res, name }, commit,
  afterChunk) {
  for (let s = 0; s < batch.messages.length; s += 5) {
    if (!isRunning() || isStale()) return
    const chunk = takeChunk(batch, s, info, limit, seen)
    if (!chunk) return
    const last = chunk[chunk.length - 1].offset
    resolveOffset(last)
    try {
      await commit(String(Number(last) + 1))
    } catch (e) {
      res.problems.push(`${name} commit: ${e.message}`)
    }
    await afterChunk()
  }
}

// res.missing / res.duplicates: values never processed, and extra times one was
function tally(res, values, seen) {
  res.duplicates = 0
  res.missing = 0
  for (const v of values) {
    const k = seen.get(v) || 0
    if (k === 0) res.missing++
    else res.duplicates += k - 1
  }
}

// The idempotent scenario's verdict on what was read back (msgs: partition -> its messages in
// offset order, values idem-<i> for i < n): counts res.read, out_of_order, offset_errors (a
// record not at the offset its place says), missing and duplicates; each(m, j) sees every
// message too.
function judgeIdempotent(res, msgs, n, each) {
  const seen = new Map()
  for (const p of Object.keys(msgs)) {
    let last = -1
    msgs[p].forEach((m, j) => {
      res.read++
      const i = Number(m.value.toString().slice(5))
      seen.set(i, (seen.get(i) || 0) + 1)
      if (i <= last) res.out_of_order++
      last = i
      if (Number(m.offset) !== j) res.offset_errors++
      if (each) each(m, j)
    })
  }
  for (let i = 0; i < n; i++) {
    const c = seen.get(i) || 0
    if (c === 0) res.missing++
    else res.duplicates += c - 1
  }
  return res
}

// The longest time between two acknowledgements (ack() at each): the proof that a leader kill
// landed while the producer was writing (its partition stalls for the election).
function ackGap() {
  const g = { last: null, longest: 0 }
  g.ack = () => {
    const now = Date.now()
    if (g.last !== null) g.longest = Math.max(g.longest, now - g.last)
    g.last = now
  }
  return g
}

// The leader-kill verdict (msgs: partition -> its messages in offset order; order: partition ->
// the values produced to it, in produce order; acked: value -> the offset its produce answer
// named, every value produced being acknowledged): each record once, in produce order, at its
// acknowledged offset, offsets dense.
function judgeAcked(msgs, order, acked) {
  const res = { produced: 0, acknowledged: acked.size, read: 0, duplicates: 0, missing: 0, out_of_order: 0, offset_errors: 0 }
  const detail = []   // the first few problems, for the failure message
  const seen = new Map()
  for (const p of Object.keys(order)) {
    const got = msgs[p] || []
    res.produced += order[p].length
    got.forEach((m, j) => {
      const v = m.value.toString()
      res.read++
      seen.set(v, (seen.get(v) || 0) + 1)
      if (order[p][j] !== v || Number(m.offset) !== j) {
        if (!res.out_of_order++ && detail.length < 10) detail.push(`p${p} offset ${m.offset} (place ${j}): ${v}, expected ${order[p][j]}`)
      }
      if (acked.get(v) !== Number(m.offset) && res.offset_errors++ < 5 && detail.length < 10) {
        detail.push(`p${p} ${v} read at ${m.offset}, acknowledged at ${acked.get(v)}`)
      }
    })
  }
  for (const vs of Object.values(order)) {
    for (const v of vs) {
      const c = seen.get(v) || 0
      if (c === 0) {
        if (res.missing++ < 5 && detail.length < 10) detail.push(`${v} (acknowledged at ${acked.get(v)}) not read`)
      } else res.duplicates += c - 1
    }
  }
  return detail.length ? Object.assign(res, { detail }) : res
}

// fn(admin) with a connected admin client of kafka, disconnected afterwards
async function withAdmin(kafka, fn) {
  const admin = kafka.admin()
  await admin.connect()
  try { return await fn(admin) } finally { await admin.disconnect() }
}

// A topic of three partitions, made by the client's createTopic(admin, topic, 3) through kafka,
// and a connected producer of kafka (config: the client's own producer options) to write to it.
async function topicProducer(kafka, createTopic, topic, config) {
  await withAdmin(kafka, admin => createTopic(admin, topic, 3))
  const producer = kafka.producer(config)
  await producer.connect()
  return producer
}

// --- the txn scenario's transactions ---------------------------------------------------------
// Five transactions, c1 a1 c2 a2 c3, the c ones committed and the a ones aborted, each three
// sends of ten records (partition i % 3, value <tag>-<send>-<i>) to topic; sendOptions: what
// else the client's send takes (acks...).  The producer is transactional and connected.
async function txnRounds(producer, topic, sendOptions = {}) {
  const rounds = [['c1', 'commit'], ['a1', 'abort'], ['c2', 'commit'], ['a2', 'abort'], ['c3', 'commit']]
  for (const [tag, end] of rounds) {
    const t = await producer.transaction()
    for (let k = 0; k < 3; k++) {
      await t.send({ topic, ...sendOptions,
        messages: Array.from({ length: 10 }, (_, i) => ({ partition: i % 3, value: `${tag}-${k}-${i}` })) })
    }
    if (end === 'commit') await t.commit()
    else await t.abort()
  }
}

// Records read per transaction tag (the value before its first '-') of msgs ({partition:
// [message, ...]}); each(message) sees every message too.
function countTags(msgs, each = () => {}) {
  const tags = {}
  for (const p of Object.keys(msgs)) {
    for (const m of msgs[p]) {
      const tag = m.value.toString().split('-')[0]
      tags[tag] = (tags[tag] || 0) + 1
      each(m)
    }
  }
  return tags
}

module.exports = { roundtrips, topicProducer, txnRounds, countTags, processBatch, ackGap, judgeAcked, securityCases, runSecurityCases, unsecuredJwt, secureRecords, judgeIdempotent, groupValues, takeChunk, tally, withAdmin, parseArgs, record, CODEC_SET, headerObject, headerList, compare, judge, runAll, fail, sleep, until, sameBytes }

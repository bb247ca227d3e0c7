#!/usr/bin/env node
/*
 * kafkajs scenarios for tests/clients/test_kafkajs.py.
 *
 *   node driver.js <scenario> --bootstrap HOST:PORT [--topic T] [--group G] [...]
 *
 * Prints exactly one JSON object on stdout: {scenario, ok, ...observations, error?, logs}.
 * A scenario never throws out of the process: an unexpected error lands in `error` with its
 * kafkajs name/type/code, and a watchdog (--deadline-ms) reports whatever was observed so far,
 * so a broker that hangs shows up as a timed-out scenario rather than a stuck test. kafkajs'
 * WARN/ERROR log goes to stderr (all of it with --debug; pytest prints it on failure) and is
 * also kept in `logs`, because some behaviour (offset-out-of-range recovery) is only visible
 * there. `requests` lists the request versions kafkajs sent.
 */
'use strict'

const {
  Kafka,
  logLevel,
  CompressionTypes,
  ConfigResourceTypes,
  AssignerProtocol,
  Partitioners,
} = require('kafkajs')

// ---------------------------------------------------------------------------------------------
// arguments, output, logging

function parseArgs(argv) {
  const scenario = argv[0]
  const opts = {}
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`)
    const key = a.slice(2)
    const next = argv[i + 1]
    if (next === undefined || next.startsWith('--')) {
      opts[key] = 'true'
    } else {
      opts[key] = next
      i++
    }
  }
  return { scenario, opts }
}

const { scenario, opts } = parseArgs(process.argv.slice(2))
const out = { scenario, ok: false }
const logs = []
const MAX_LOGS = 200
const debug = opts.debug === 'true'
let finished = false

function finish(code) {
  if (finished) return
  finished = true
  out.logs = logs
  out.requests = [...requestsSent].sort()
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(code))
}

// kafkajs logs every request at DEBUG as "Request Name(key: K, version: V)": the versions it
// negotiated from ApiVersions, collected here as a sorted set.
const requestsSent = new Set()
let fetchCount = 0
const REQUEST_RE = /^Request (\w+)\(key: (\d+), version: (\d+)\)/

const logCreator = () => ({ namespace, level, label, log }) => {
  const { message, timestamp, logger, ...extra } = log
  const req = namespace === 'Connection' && REQUEST_RE.exec(message)
  if (req) {
    requestsSent.add(`${req[1]} v${req[3]}`)
    if (req[1] === 'Fetch') fetchCount++
  }
  if (debug || level <= logLevel.WARN) {
    process.stderr.write(`${label} [${namespace}] ${message} ${safeJson(extra)}\n`)
  }
  if (level <= logLevel.WARN && logs.length < MAX_LOGS) {
    logs.push({ level: label, namespace, message, error: extra.error, topic: extra.topic,
      partition: extra.partition })
  }
}

function safeJson(v) {
  try {
    return JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? String(x) : x))
  } catch (e) {
    return String(v)
  }
}

/** A kafkajs error as data: class name, Kafka error type/code, and the chain of causes. */
function errInfo(e, depth = 0) {
  if (e == null) return null
  const info = {
    name: e.name,
    message: e.message,
    type: e.type,
    code: e.code,
    retriable: e.retriable,
  }
  if (e.retryCount !== undefined) info.retryCount = e.retryCount
  if (e.topic !== undefined) info.topic = e.topic
  if (e.partition !== undefined) info.partition = e.partition
  if (depth < 4) {
    if (e.cause && e.cause !== e) info.cause = errInfo(e.cause, depth + 1)
    if (Array.isArray(e.errors)) info.errors = e.errors.map(x => errInfo(x, depth + 1))
    if (Array.isArray(e.groups)) {
      info.groups = e.groups.map(g => ({ groupId: g.groupId, errorCode: g.errorCode,
        error: errInfo(g.error, depth + 1) }))
    }
  }
  if (depth === 0 && e.stack && !e.type) info.stack = String(e.stack).split('\n').slice(0, 6)
  return info
}

/** The innermost Kafka error type in a chain (retries wrap the broker's error). */
function rootType(info) {
  let cur = info
  for (let i = 0; cur && i < 6; i++) {
    if (cur.type) return cur.type
    cur = cur.cause || (cur.errors && cur.errors[0])
  }
  return null
}

/** Run fn, returning {ok, value} or {ok:false, error} — for steps expected to fail. */
async function attempt(fn) {
  try {
    return { ok: true, value: await fn() }
  } catch (e) {
    const error = errInfo(e)
    return { ok: false, error, rootType: rootType(error) }
  }
}

const t0 = Date.now()
/** Elapsed ms at a named step: shows where a slow scenario spends its time. */
function mark(name) {
  out.timings = out.timings || {}
  out.timings[name] = Date.now() - t0
}

const sleep = ms => new Promise(r => setTimeout(r, ms))

/** Poll `fn` until it returns a truthy value or `ms` elapses; returns the last value. */
async function until(fn, ms, every = 100) {
  const deadline = Date.now() + ms
  let v
  for (let i = 0; i < 10000; i++) {
    v = await fn()
    if (v || Date.now() >= deadline) return v
    await sleep(every)
  }
  return v
}

// ---------------------------------------------------------------------------------------------
// kafkajs objects tuned for a loopback single-node broker: short retries and a short fetch wait
// so nothing idles for kafkajs' multi-second defaults.

/**
 * kafkajs' `ssl` and `sasl` options from --tls-ca (PEM CA: turns TLS on), --tls-cert/--tls-key
 * (PEM client certificate and key: mTLS) and --sasl-mechanism (plain, scram-sha-256,
 * scram-sha-512) with --sasl-user/--sasl-password; none of them when the flags are absent.
 */
function securityOpts() {
  const fs = require('fs')
  const res = {}
  if (opts['tls-ca'] || opts['tls-cert']) {
    res.ssl = { rejectUnauthorized: true }
    if (opts['tls-ca']) res.ssl.ca = [fs.readFileSync(opts['tls-ca'], 'utf8')]
    if (opts['tls-cert']) {
      res.ssl.cert = fs.readFileSync(opts['tls-cert'], 'utf8')
      res.ssl.key = fs.readFileSync(opts['tls-key'], 'utf8')
    }
  }
  if (opts['sasl-mechanism']) {
    res.sasl = { mechanism: opts['sasl-mechanism'].toLowerCase(),
      username: opts['sasl-user'], password: opts['sasl-password'] }
  }
  return res
}

const kafka = new Kafka({
  clientId: `kactor-kafkajs-${scenario}`,
  brokers: [opts.bootstrap],
  logLevel: logLevel.DEBUG,
  logCreator,
  connectionTimeout: 3000,
  requestTimeout: 15000,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: Number(opts.retries || 5) },
  ...securityOpts(),
})

const toClose = []
function track(client) {
  toClose.push(client)
  return client
}

function admin(extra = {}) {
  return track(kafka.admin(extra))
}

function producer(extra = {}) {
  return track(kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, ...extra }))
}

function consumer(groupId, extra = {}) {
  return track(
    kafka.consumer({
      groupId,
      sessionTimeout: 6000,
      rebalanceTimeout: 8000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 100,
      retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 5 },
      ...extra,
    })
  )
}

/** --max-bytes-per-partition N and the like, as {maxBytesPerPartition: N} for kafkajs. */
function numericOpts(names) {
  const res = {}
  for (const name of names) {
    const flag = name.replace(/[A-Z]/g, c => `-${c.toLowerCase()}`)
    if (opts[flag] !== undefined) res[name] = Number(opts[flag])
  }
  return res
}

const str = b => (b == null ? null : Buffer.isBuffer(b) ? b.toString('utf8') : String(b))

function headersOf(h) {
  const res = {}
  for (const [k, v] of Object.entries(h || {})) {
    res[k] = Array.isArray(v) ? v.map(str) : str(v)
  }
  return res
}

function recordOf(topic, partition, m) {
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: str(m.key),
    value: str(m.value),
    headers: headersOf(m.headers),
    timestamp: Number(m.timestamp),
    // The record batch the broker stored it in, as kafkajs decoded it.
    producerId: m.batchContext ? Number(m.batchContext.producerId) : null,
    producerEpoch: m.batchContext ? m.batchContext.producerEpoch : null,
    firstSequence: m.batchContext ? m.batchContext.firstSequence : null,
    inTransaction: m.batchContext ? m.batchContext.inTransaction : null,
  }
}

/** The record metadata of a send, with offsets as numbers. */
function sendResult(res) {
  return res.map(r => ({
    topic: r.topicName,
    partition: r.partition,
    errorCode: r.errorCode,
    baseOffset: r.baseOffset == null ? null : Number(r.baseOffset),
    logAppendTime: r.logAppendTime == null ? null : String(r.logAppendTime),
    logStartOffset: r.logStartOffset == null ? null : Number(r.logStartOffset),
  }))
}

function offsetsOf(list) {
  return list.map(p => ({
    partition: p.partition,
    offset: Number(p.offset),
    high: p.high === undefined ? undefined : Number(p.high),
    low: p.low === undefined ? undefined : Number(p.low),
  })).sort((a, b) => a.partition - b.partition)
}

/** admin.fetchOffsets as {topic: {partition: offset}} */
async function committed(adm, groupId, topics) {
  const res = await adm.fetchOffsets({ groupId, topics })
  const m = {}
  for (const { topic, partitions } of res) {
    m[topic] = {}
    for (const p of partitions) m[topic][p.partition] = Number(p.offset)
  }
  return m
}

function groupSummary(g) {
  return {
    groupId: g.groupId,
    state: g.state,
    protocolType: g.protocolType,
    protocol: g.protocol,
    errorCode: g.errorCode,
    members: (g.members || []).map(m => {
      let assignment = null
      try {
        const a = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
        assignment = a && a.assignment
      } catch (e) {
        assignment = { decodeError: String(e.message) }
      }
      return { memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost, assignment }
    }),
  }
}

/** Values the tests can predict: record i of a run (key, value, headers, timestamp). */
function message(i, baseTs, tag = 'm') {
  return {
    key: `${tag}-key-${i}`,
    value: `${tag}-value-${i}-` + 'x'.repeat(i % 5),
    headers: { idx: String(i), src: 'kafkajs' },
    timestamp: String(baseTs + i),
  }
}

// ---------------------------------------------------------------------------------------------
// consuming: one group member, bounded by count and time

/**
 * Consume with a group until `count` records arrived or `timeoutMs` passed. At the target the
 * member pauses (nothing further is processed or committed) and stays `graceMs` more, so
 * records still in flight show up as `extra`. Returns records in arrival order, GROUP_JOIN
 * payloads, crash events and commit errors; the member leaves the group on return.
 */
async function consumeGroup({
  groupId,
  topics,
  count,
  mode = 'eachMessage',
  commit = 'auto',
  fromBeginning = true,
  readUncommitted = false,
  timeoutMs = 20000,
  graceMs = 500,
  afterRun,
  consumerOpts = {},
}) {
  const c = consumer(groupId, { readUncommitted, ...consumerOpts })
  const result = { records: [], joins: [], crashes: [], batches: [], commitErrors: [] }
  c.on(c.events.GROUP_JOIN, e => result.joins.push({ memberId: e.payload.memberId,
    isLeader: e.payload.isLeader, memberAssignment: e.payload.memberAssignment,
    groupProtocol: e.payload.groupProtocol }))
  c.on(c.events.CRASH, e => result.crashes.push({ error: errInfo(e.payload.error),
    restart: e.payload.restart }))
  await c.connect()
  for (const topic of topics) await c.subscribe({ topic, fromBeginning })
  let reached
  const done = new Promise(r => (reached = r))
  const pauseAll = () => c.pause(topics.map(topic => ({ topic })))

  const manualCommit = async (topic, partition, offset) => {
    try {
      await c.commitOffsets([{ topic, partition, offset: String(offset + 1) }])
    } catch (e) {
      result.commitErrors.push(errInfo(e))
    }
  }

  const runOpts = {}
  if (mode === 'eachBatch') {
    runOpts.eachBatchAutoResolve = false
    runOpts.eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      result.batches.push({ topic: batch.topic, partition: batch.partition,
        firstOffset: batch.firstOffset(), lastOffset: batch.lastOffset(),
        highWatermark: Number(batch.highWatermark), size: batch.messages.length })
      for (const m of batch.messages) {
        if (!isRunning() || isStale()) break
        if (result.records.length >= count) {
          result.extra = (result.extra || 0) + 1
          break
        }
        result.records.push(recordOf(batch.topic, batch.partition, m))
        resolveOffset(m.offset)
        if (commit === 'manual') await manualCommit(batch.topic, batch.partition, Number(m.offset))
      }
      await heartbeat()
      if (result.records.length >= count) {
        pauseAll()
        reached()
      }
    }
  } else {
    runOpts.eachMessage = async ({ topic, partition, message: m }) => {
      if (result.records.length >= count) {
        // Beyond the target (a batch already in flight on another partition): note it only.
        result.extra = (result.extra || 0) + 1
        return
      }
      result.records.push(recordOf(topic, partition, m))
      if (commit === 'manual') await manualCommit(topic, partition, Number(m.offset))
      if (result.records.length >= count) {
        // Pausing stops the runner after this record, so nothing past the target gets committed.
        pauseAll()
        reached()
      }
    }
  }
  if (commit === 'auto') {
    // Commit after every record: the committed offsets are then exact, not interval-dependent.
    runOpts.autoCommitThreshold = 1
  } else {
    runOpts.autoCommit = false
  }
  await c.run(runOpts)
  if (afterRun) await afterRun(c, result)
  const timedOut = await Promise.race([done.then(() => false), sleep(timeoutMs).then(() => true)])
  result.timedOut = timedOut
  if (!timedOut && graceMs > 0) await sleep(graceMs)
  await c.disconnect()
  return result
}

// ---------------------------------------------------------------------------------------------
// scenarios

const scenarios = {}

/** Topic lifecycle through the admin client, including the errors a user typically hits. */
scenarios['admin-topics'] = async () => {
  const topic = opts.topic
  const adm = admin()
  await adm.connect()
  out.created = await adm.createTopics({
    topics: [{
      topic,
      numPartitions: 3,
      replicationFactor: 1,
      configEntries: [
        { name: 'retention.ms', value: '3600000' },
        { name: 'max.message.bytes', value: '200000' },
      ],
    }],
  })
  out.createdAgain = await attempt(() => adm.createTopics({
    topics: [{ topic, numPartitions: 1 }] }))
  out.listed = (await adm.listTopics()).includes(topic)
  const md = await adm.fetchTopicMetadata({ topics: [topic] })
  out.metadata = md.topics.map(t => ({
    name: t.name,
    partitions: t.partitions
      .map(p => ({ partitionId: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr,
        partitionErrorCode: p.partitionErrorCode }))
      .sort((a, b) => a.partitionId - b.partitionId),
  }))
  out.cluster = await adm.describeCluster()

  const describe = async () => {
    const res = await adm.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
        configNames: ['retention.ms', 'max.message.bytes', 'cleanup.policy'] }],
    })
    return res.resources.map(r => ({
      errorCode: r.errorCode,
      resourceName: r.resourceName,
      resourceType: r.resourceType,
      configs: Object.fromEntries(r.configEntries.map(c => [c.configName,
        { value: c.configValue, isDefault: c.isDefault, readOnly: c.readOnly,
          configSource: c.configSource, isSensitive: c.isSensitive }])),
    }))
  }
  out.configsBefore = await describe()
  const brokerCfg = await adm.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.BROKER, name: String(out.cluster.brokers[0].nodeId),
      configNames: ['num.partitions', 'auto.create.topics.enable'] }],
  })
  out.brokerConfigs = brokerCfg.resources.map(r => ({ errorCode: r.errorCode,
    resourceName: r.resourceName,
    configs: Object.fromEntries(r.configEntries.map(c => [c.configName,
      { value: c.configValue, readOnly: c.readOnly, configSource: c.configSource }])) }))
  // AlterConfigs (non-incremental) replaces the topic's whole dynamic config: max.message.bytes
  // set at creation is expected to fall back to its default.
  out.alter = await adm.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
      configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
  })
  out.configsAfter = await describe()
  out.alterInvalid = await attempt(() => adm.alterConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
      configEntries: [{ name: 'retention.ms', value: 'not-a-number' }] }],
  }))
  out.describeMissing = await attempt(() => adm.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: `${topic}-missing` }],
  }))

  await adm.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
  const md2 = await adm.fetchTopicMetadata({ topics: [topic] })
  out.partitionsAfterGrow = md2.topics[0].partitions.map(p => p.partitionId).sort((a, b) => a - b)
  out.shrink = await attempt(() => adm.createPartitions({ topicPartitions: [{ topic, count: 2 }] }))

  await adm.deleteTopics({ topics: [topic], timeout: 10000 })
  out.listedAfterDelete = await until(async () => !(await adm.listTopics()).includes(topic), 10000)
    ? false : true
  // kafkajs retries UNKNOWN_TOPIC_OR_PARTITION on delete; one retry shows the error as well.
  const quick = admin({ retry: { retries: 0 } })
  await quick.connect()
  out.deleteMissing = await attempt(() => quick.deleteTopics({ topics: [`${topic}-missing`],
    timeout: 5000 }))
  out.ok = true
}

/** Watermarks, timestamp lookup and DeleteRecords on a topic the test created (2 partitions). */
scenarios['admin-offsets'] = async () => {
  const topic = opts.topic
  const baseTs = Number(opts['base-ts'])
  const adm = admin()
  await adm.connect()
  const p = producer()
  await p.connect()
  out.empty = offsetsOf(await adm.fetchTopicOffsets(topic))
  // 5 records on partition 0 at baseTs + 0, 1000, ..., 4000; 3 on partition 1.
  const msgs = i => ({ key: `k${i}`, value: `v${i}`, timestamp: String(baseTs + i * 1000) })
  out.sent = [
    ...sendResult(await p.send({ topic, acks: -1,
      messages: [0, 1, 2, 3, 4].map(i => ({ ...msgs(i), partition: 0 })) })),
    ...sendResult(await p.send({ topic, acks: -1,
      messages: [0, 1, 2].map(i => ({ ...msgs(i), partition: 1 })) })),
  ]
  out.offsets = offsetsOf(await adm.fetchTopicOffsets(topic))
  out.byTimestamp = {}
  for (const [name, ts] of [['before', baseTs - 10000], ['exact2', baseTs + 2000],
    ['between2and3', baseTs + 2500], ['after', baseTs + 100000]]) {
    out.byTimestamp[name] = offsetsOf(await adm.fetchTopicOffsetsByTimestamp(topic, ts))
  }
  await adm.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '2' }] })
  out.afterDeleteRecords = offsetsOf(await adm.fetchTopicOffsets(topic))
  out.ok = true
}

/** Plain producer: acks -1/1, gzip, keys/headers/timestamps, null key/value, sendBatch. */
scenarios.produce = async () => {
  const topic = opts.topic
  const topic2 = opts.topic2
  const baseTs = Number(opts['base-ts'])
  const p = producer({ allowAutoTopicCreation: false })
  await p.connect()
  out.sent = []
  out.results = {}
  const send = async (name, records, sendOpts) => {
    out.results[name] = sendResult(await p.send({ topic, messages: records, ...sendOpts }))
    for (const r of records) out.sent.push({ topic, ...r })
  }
  let i = 0
  const next = (n, partition) => Array.from({ length: n }, () => ({ ...message(i++, baseTs),
    partition }))
  await send('acksAll', next(5, 0), { acks: -1 })
  await send('acksLeader', next(5, 0), { acks: 1 })
  await send('gzip', next(5, 0), { acks: -1, compression: CompressionTypes.GZIP })
  await send('nulls', [
    { key: null, value: 'no-key', partition: 0, timestamp: String(baseTs + 100) },
    { key: 'tombstone', value: null, partition: 0, timestamp: String(baseTs + 101) },
  ], { acks: -1 })
  const batchT1 = next(4, 1)
  const batchT2 = Array.from({ length: 3 }, (_, j) => ({ ...message(j, baseTs, 'b'),
    partition: 0 }))
  const res = await p.sendBatch({
    acks: -1,
    compression: CompressionTypes.GZIP,
    topicMessages: [{ topic, messages: batchT1 }, { topic: topic2, messages: batchT2 }],
  })
  out.results.sendBatch = sendResult(res)
  for (const r of batchT1) out.sent.push({ topic, ...r })
  for (const r of batchT2) out.sent.push({ topic: topic2, ...r })
  await p.disconnect()
  out.ok = true
}

/** --count records `${--prefix}${i}` to --partition (default 0), in one send. */
scenarios['send-n'] = async () => {
  const p = producer()
  await p.connect()
  const prefix = opts.prefix || 'r'
  out.results = sendResult(await p.send({ topic: opts.topic, acks: -1,
    messages: Array.from({ length: Number(opts.count) }, (_, i) => ({
      partition: Number(opts.partition || 0), key: `${prefix}${i}`, value: `${prefix}${i}` })) }))
  await p.disconnect()
  out.ok = true
}

/** Idempotent producer: InitProducerId, sequence numbers across several sends. */
scenarios.idempotent = async () => {
  const topic = opts.topic
  const baseTs = Number(opts['base-ts'])
  const p = producer({ idempotent: true, maxInFlightRequests: 1 })
  await p.connect()
  out.results = []
  out.sent = []
  for (let s = 0; s < 3; s++) {
    const msgs = Array.from({ length: 4 }, (_, j) => ({ ...message(s * 4 + j, baseTs),
      partition: 0 }))
    out.results.push(sendResult(await p.send({ topic, acks: -1, messages: msgs,
      compression: s === 2 ? CompressionTypes.GZIP : CompressionTypes.None })))
    out.sent.push(...msgs)
  }
  await p.disconnect()
  out.ok = true
}

/** One group member reading `--count` records. */
scenarios.consume = async () => {
  const topics = opts.topic.split(',')
  const res = await consumeGroup({
    groupId: opts.group,
    topics,
    count: Number(opts.count),
    mode: opts.mode || 'eachMessage',
    commit: opts.commit || 'auto',
    fromBeginning: opts['from-beginning'] !== 'false',
    readUncommitted: opts['read-uncommitted'] === 'true',
    timeoutMs: Number(opts['timeout-ms'] || 20000),
    graceMs: Number(opts['grace-ms'] || 500),
    consumerOpts: numericOpts(['maxBytesPerPartition', 'maxBytes', 'maxWaitTimeInMs']),
  })
  Object.assign(out, res)
  const adm = admin()
  await adm.connect()
  out.committed = await committed(adm, opts.group, topics)
  out.group = groupSummary((await adm.describeGroups([opts.group])).groups[0])
  out.ok = !res.timedOut
}

/** Two members of one group share a 4-partition topic, then the group is inspected. */
scenarios['group-split'] = async () => {
  const topic = opts.topic
  const groupId = opts.group
  const perPartition = Number(opts['per-partition'] || 5)
  const members = [0, 1].map(n => {
    const state = { n, joins: [], records: [], crashes: [] }
    const c = consumer(groupId)
    c.on(c.events.GROUP_JOIN, e => state.joins.push({ memberId: e.payload.memberId,
      isLeader: e.payload.isLeader, memberAssignment: e.payload.memberAssignment }))
    c.on(c.events.CRASH, e => state.crashes.push(errInfo(e.payload.error)))
    state.consumer = c
    return state
  })
  const start = async m => {
    await m.consumer.connect()
    await m.consumer.subscribe({ topic, fromBeginning: true })
    await m.consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message: msg }) => {
        m.records.push(recordOf(topic, partition, msg))
      },
    })
  }
  const assigned = m => {
    const last = m.joins[m.joins.length - 1]
    return last ? (last.memberAssignment[topic] || []) : null
  }
  await start(members[0])
  out.firstAlone = await until(() => (assigned(members[0]) || []).length === 4, 15000)
  await start(members[1])
  // Settled: both joined the same generation and their assignments cover the 4 partitions.
  out.settled = await until(() => {
    const a = assigned(members[0])
    const b = assigned(members[1])
    return a && b && a.length + b.length === 4 && new Set([...a, ...b]).size === 4
  }, 20000)
  const adm = admin()
  await adm.connect()
  out.running = groupSummary((await adm.describeGroups([groupId])).groups[0])
  out.listed = (await adm.listGroups()).groups.filter(g => g.groupId === groupId)
  const p = producer()
  await p.connect()
  const msgs = []
  for (let part = 0; part < 4; part++) {
    for (let j = 0; j < perPartition; j++) msgs.push({ partition: part, key: `p${part}-${j}`,
      value: `v${part}-${j}` })
  }
  out.sent = sendResult(await p.send({ topic, acks: -1, messages: msgs }))
  const total = 4 * perPartition
  out.allConsumed = await until(() => members[0].records.length + members[1].records.length
    >= total, 15000)
  await sleep(300)
  for (const m of members) await m.consumer.disconnect()
  out.members = members.map(m => ({ joins: m.joins, assigned: assigned(m), records: m.records,
    crashes: m.crashes }))
  out.committed = await committed(adm, groupId, [topic])
  out.afterStop = groupSummary((await adm.describeGroups([groupId])).groups[0])
  out.ok = true
}

/** fetchOffsets / describeGroups / listGroups / setOffsets / resetOffsets / deleteGroups. */
scenarios['group-admin'] = async () => {
  const topic = opts.topic
  const groupId = opts.group
  const adm = admin()
  await adm.connect()
  const p = producer()
  await p.connect()
  const msgs = []
  for (let i = 0; i < 6; i++) msgs.push({ partition: i % 2, value: `g${i}` })
  out.sent = sendResult(await p.send({ topic, acks: -1, messages: msgs }))
  out.unknownGroup = {
    committed: await committed(adm, groupId, [topic]),
    described: groupSummary((await adm.describeGroups([groupId])).groups[0]),
  }
  const first = await consumeGroup({ groupId, topics: [topic], count: 6, graceMs: 200 })
  mark('firstRun')
  out.firstRun = { records: first.records.length, timedOut: first.timedOut }
  out.committedAfterRun = await committed(adm, groupId, [topic])
  out.described = groupSummary((await adm.describeGroups([groupId])).groups[0])
  out.listed = (await adm.listGroups()).groups.filter(g => g.groupId === groupId)

  // While a member is running the group can be neither deleted (broker: NON_EMPTY_GROUP) nor
  // reset (kafkajs checks the state DescribeGroups reports).
  const holder = consumer(groupId)
  let joined = false
  holder.on(holder.events.GROUP_JOIN, () => (joined = true))
  await holder.connect()
  await holder.subscribe({ topic, fromBeginning: true })
  await holder.run({ eachMessage: async () => {} })
  mark('holderJoined')
  out.holderJoined = await until(() => joined, 15000)
  out.describedRunning = groupSummary((await adm.describeGroups([groupId])).groups[0])
  // DeleteGroups errors are retried by kafkajs; expected failures go through a no-retry admin.
  const quick = admin({ retry: { retries: 0 } })
  await quick.connect()
  mark('deleteWhileRunning')
  out.deleteWhileRunning = await attempt(() => quick.deleteGroups([groupId]))
  mark('resetWhileRunning')
  out.resetWhileRunning = await attempt(() => adm.resetOffsets({ groupId, topic }))
  await holder.disconnect()

  // resetOffsets goes through a kafkajs-internal consumer that seeks and commits; kafkajs
  // commits its EARLIEST sentinel (-2) as is. A member treats a negative committed offset as
  // none and applies fromBeginning: all 6 records again, where the un-reset group (3/3) would
  // have had nothing to read.
  mark('resetOffsets')
  out.resetOffsets = await attempt(() => adm.resetOffsets({ groupId, topic, earliest: true }))
  out.committedAfterReset = await committed(adm, groupId, [topic])
  mark('resumed')
  const resumed = await consumeGroup({ groupId, topics: [topic], count: 6, graceMs: 300,
    commit: 'none', timeoutMs: 10000 })
  out.resumed = resumed.records.map(r => [r.partition, r.offset])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
  mark('deleted')
  out.deleted = await attempt(() => adm.deleteGroups([groupId]))
  out.listedAfterDelete = (await adm.listGroups()).groups.filter(g => g.groupId === groupId)
  out.describedAfterDelete = groupSummary((await adm.describeGroups([groupId])).groups[0])
  out.committedAfterDelete = await committed(adm, groupId, [topic])
  mark('deleteMissing')
  out.deleteMissing = await attempt(() => quick.deleteGroups([`${groupId}-missing`]))
  out.ok = true
}

/** Transactions: commit, abort, commit; then read_committed vs read_uncommitted; sendOffsets. */
scenarios.transactions = async () => {
  const topic = opts.topic
  const group = opts.group
  const p = producer({ transactionalId: `${topic}-txid`, idempotent: true,
    maxInFlightRequests: 1 })
  await p.connect()
  out.txns = []
  const txn = async (name, values, end, offsets) => {
    const t = await p.transaction()
    const res = sendResult(await t.send({ topic, acks: -1,
      messages: values.map(v => ({ partition: 0, key: name, value: v })) }))
    if (offsets) await t.sendOffsets({ consumerGroupId: offsets.group,
      topics: [{ topic, partitions: [{ partition: 0, offset: String(offsets.offset) }] }] })
    if (end === 'commit') await t.commit()
    else await t.abort()
    out.txns.push({ name, end, results: res })
  }
  await txn('t1', ['c1', 'c2', 'c3'], 'commit')
  await txn('t2', ['a1', 'a2'], 'abort')
  await txn('t3', ['c4', 'c5'], 'commit')
  await txn('t4', ['c6'], 'commit', { group: `${group}-sent`, offset: 4 })
  await txn('t5', ['a3'], 'abort', { group: `${group}-aborted`, offset: 7 })

  await p.disconnect()

  const adm = admin()
  await adm.connect()
  out.offsets = offsetsOf(await adm.fetchTopicOffsets(topic))
  out.sentOffsetsCommitted = await committed(adm, `${group}-sent`, [topic])
  out.sentOffsetsAborted = await committed(adm, `${group}-aborted`, [topic])
  const rc = await consumeGroup({ groupId: `${group}-rc`, topics: [topic], count: 6,
    graceMs: 700, commit: 'none' })
  out.readCommitted = rc.records
  out.readCommittedTimedOut = rc.timedOut
  const ru = await consumeGroup({ groupId: `${group}-ru`, topics: [topic], count: 9,
    graceMs: 700, commit: 'none', readUncommitted: true })
  out.readUncommitted = ru.records
  out.readUncommittedTimedOut = ru.timedOut
  out.ok = true
}

/**
 * Zombie fencing: each new producer with the same transactional.id (InitProducerId, epoch + 1)
 * fences the previous one, which then tries one more request: Produce (to a partition already
 * in its transaction), EndTxn (commit), AddPartitionsToTxn (first send of a transaction) or
 * AddOffsetsToTxn (sendOffsets).
 */
scenarios['txn-fencing'] = async () => {
  const topic = opts.topic
  const txid = `${topic}-txid`
  const make = async () => {
    const p = producer({ transactionalId: txid, idempotent: true, maxInFlightRequests: 1 })
    await p.connect()
    return p
  }
  const msg = v => ({ topic, acks: -1, messages: [{ partition: 0, value: v }] })
  // kafkajs sends InitProducerId on the first transaction(), not on connect().
  let cur = await make()
  let curTxn = await cur.transaction()
  const fence = async () => {
    const next = await make()
    const nextTxn = await next.transaction()
    const old = { producer: cur, txn: curTxn }
    cur = next
    curTxn = nextTxn
    return old
  }
  // Produce: the partition is already in the zombie's transaction, so only Produce is sent.
  out.zombieSends = [sendResult(await curTxn.send(msg('zombie-0')))]
  let z = await fence()
  out.produce = await attempt(() => z.txn.send(msg('zombie-0b')))
  // EndTxn: the zombie had added the partition and produced before being fenced.
  out.zombieSends.push(sendResult(await curTxn.send(msg('zombie-1'))))
  z = await fence()
  out.endTxn = await attempt(() => z.txn.commit())
  // AddPartitionsToTxn: the zombie's first send in its transaction.
  z = await fence()
  out.addPartitions = await attempt(() => z.txn.send(msg('zombie-2')))
  // AddOffsetsToTxn.
  z = await fence()
  out.addOffsets = await attempt(() => z.txn.sendOffsets({ consumerGroupId: `${topic}-g`,
    topics: [{ topic, partitions: [{ partition: 0, offset: '0' }] }] }))
  // The live producer still works.
  out.liveSend = sendResult(await curTxn.send(msg('live')))
  await curTxn.commit()
  const adm = admin()
  await adm.connect()
  out.offsets = offsetsOf(await adm.fetchTopicOffsets(topic))
  const rc = await consumeGroup({ groupId: `${topic}-rc`, topics: [topic], count: 1,
    graceMs: 700, commit: 'none' })
  out.readCommitted = rc.records.map(r => ({ offset: r.offset, value: r.value,
    producerEpoch: r.producerEpoch }))
  out.ok = true
}

/**
 * An open transaction holds back the last stable offset: read_committed readers (kafkajs'
 * consumer and its admin ListOffsets, both READ_COMMITTED by default) stop at its first
 * record, even for non-transactional records written after it, until it ends.
 */
scenarios['open-txn'] = async () => {
  const topic = opts.topic
  const plain = producer()
  await plain.connect()
  const tp = producer({ transactionalId: `${topic}-txid`, idempotent: true,
    maxInFlightRequests: 1 })
  await tp.connect()
  const adm = admin()
  await adm.connect()
  const one = v => ({ topic, acks: -1, messages: [{ partition: 0, value: v }] })
  out.sent = []
  out.sent.push(...sendResult(await plain.send(one('before'))))
  const txn = await tp.transaction()
  out.sent.push(...sendResult(await txn.send({ topic, acks: -1,
    messages: [{ partition: 0, value: 'txn-1' }, { partition: 0, value: 'txn-2' }] })))
  out.sent.push(...sendResult(await plain.send(one('after'))))
  out.offsetsWhileOpen = offsetsOf(await adm.fetchTopicOffsets(topic))

  const c = consumer(`${topic}-rc`)
  const seen = []
  c.on(c.events.CRASH, e => (out.crash = errInfo(e.payload.error)))
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  await c.run({
    eachMessage: async ({ message: m }) => seen.push([Number(m.offset), str(m.value)]),
  })
  await until(() => seen.length >= 1, 10000)
  // Long enough for several fetches (maxWaitTimeInMs is 100) to pass the open transaction.
  await sleep(1500)
  out.seenWhileOpen = seen.slice()
  await txn.commit()
  out.allSeen = await until(() => seen.length >= 4, 10000)
  await sleep(300)
  out.seenAfterCommit = seen.slice()
  out.offsetsAfterCommit = offsetsOf(await adm.fetchTopicOffsets(topic))
  await c.disconnect()
  out.ok = true
}

/**
 * Fetch long polling: a consumer with nothing to read should see its Fetch parked for
 * maxWaitTimeInMs, and a record produced meanwhile should complete the parked Fetch.
 */
scenarios['fetch-wait'] = async () => {
  const topic = opts.topic
  const waitMs = Number(opts['max-wait-ms'] || 2000)
  const c = consumer(`${topic}-g`, { maxWaitTimeInMs: waitMs })
  let joined = false
  let receivedAt = null
  c.on(c.events.GROUP_JOIN, () => (joined = true))
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  await c.run({ eachMessage: async () => { receivedAt = receivedAt || Date.now() } })
  out.joined = await until(() => joined, 15000)
  // Idle: count the Fetch requests kafkajs issues against an empty partition.
  await sleep(500)
  const fetchesBefore = fetchCount
  const idleMs = Number(opts['idle-ms'] || 3000)
  await sleep(idleMs)
  out.idleFetches = fetchCount - fetchesBefore
  out.idleMs = idleMs
  // Produce in the middle of a parked Fetch.
  const p = producer()
  await p.connect()
  await sleep(waitMs / 4)
  const sentAt = Date.now()
  out.sent = sendResult(await p.send({ topic, acks: -1, messages: [{ partition: 0, value: 'x' }] }))
  out.received = await until(() => receivedAt !== null, waitMs * 3)
  out.latencyMs = receivedAt === null ? null : receivedAt - sentAt
  out.waitMs = waitMs
  await c.disconnect()
  out.ok = true
}

/** acks=0 sends (no response expected), then an acks=-1 send that reports the next offset. */
scenarios['acks-zero'] = async () => {
  const topic = opts.topic
  const p = producer()
  await p.connect()
  out.acks0 = []
  for (let i = 0; i < 3; i++) {
    out.acks0.push(await p.send({ topic, acks: 0, messages: [{ partition: 0, value: `z${i}` }] }))
  }
  out.acksAll = sendResult(await p.send({ topic, acks: -1,
    messages: [{ partition: 0, value: 'last' }] }))
  await p.disconnect()
  out.ok = true
}

/** A group member that runs until killed (the test kills it to let its session expire). */
scenarios.member = async () => {
  const c = consumer(opts.group)
  c.on(c.events.GROUP_JOIN, e => process.stderr.write(`GROUP_JOIN ${JSON.stringify(
    e.payload.memberAssignment)}\n`))
  await c.connect()
  await c.subscribe({ topic: opts.topic, fromBeginning: true })
  await c.run({ autoCommit: false, eachMessage: async () => {} })
  await sleep(Number(opts['run-ms'] || 60000))
  out.ok = true
}

/** DescribeConfigs for one resource: --type broker|topic --name N [--names a,b,c]. */
scenarios['describe-configs'] = async () => {
  const adm = admin()
  await adm.connect()
  const type = opts.type === 'broker' ? ConfigResourceTypes.BROKER : ConfigResourceTypes.TOPIC
  const res = await adm.describeConfigs({
    includeSynonyms: opts.synonyms === 'true',
    resources: [{ type, name: opts.name,
      configNames: opts.names ? opts.names.split(',') : undefined }],
  })
  const r = res.resources[0]
  out.errorCode = r.errorCode
  out.configs = Object.fromEntries(r.configEntries.map(c => [c.configName, {
    value: c.configValue, configSource: c.configSource, readOnly: c.readOnly,
    isDefault: c.isDefault, isSensitive: c.isSensitive }]))
  out.ok = true
}

/**
 * Delete a topic a group has offsets for, then recreate it: the group's offsets must go with
 * the deleted topic, so the group reads the new topic from its start.
 */
scenarios['topic-recreate'] = async () => {
  const topic = opts.topic
  const groupId = opts.group
  const adm = admin()
  await adm.connect()
  const p = producer()
  await p.connect()
  await adm.createTopics({ topics: [{ topic, numPartitions: 1 }] })
  out.sentBefore = sendResult(await p.send({ topic, acks: -1,
    messages: [{ partition: 0, value: 'old-0' }, { partition: 0, value: 'old-1' }] }))
  const first = await consumeGroup({ groupId, topics: [topic], count: 2, graceMs: 200 })
  out.firstRun = first.records.map(r => [r.offset, r.value])
  out.committedBefore = await committed(adm, groupId, [topic])
  await adm.deleteTopics({ topics: [topic], timeout: 10000 })
  // fetchOffsets without topics: everything the group has committed.
  const all = async () => (await adm.fetchOffsets({ groupId }))
    .map(t => [t.topic, t.partitions.map(x => [x.partition, Number(x.offset)])])
  out.groupGone = await until(async () => (await all()).length === 0, 5000)
  out.allOffsetsAfterDelete = await all()
  // createTopics resolves false while the name is still taken by the deletion.
  out.recreated = await until(async () => {
    try {
      return await adm.createTopics({ topics: [{ topic, numPartitions: 1 }] })
    } catch (e) {
      return false
    }
  }, 15000, 250)
  out.offsetsAfterRecreate = offsetsOf(await adm.fetchTopicOffsets(topic))
  const p2 = producer()
  await p2.connect()
  // Three records: a stale committed offset 2 would be in range and skip the first two.
  out.sentAfter = sendResult(await p2.send({ topic, acks: -1,
    messages: [0, 1, 2].map(i => ({ partition: 0, value: `new-${i}` })) }))
  out.committedAfterRecreate = await committed(adm, groupId, [topic])
  const second = await consumeGroup({ groupId, topics: [topic], count: 3, graceMs: 300,
    timeoutMs: 5000, commit: 'none' })
  out.secondRun = second.records.map(r => [r.offset, r.value])
  out.secondTimedOut = second.timedOut
  out.ok = true
}

/**
 * An abandoned transaction (transactionTimeout --txn-timeout-ms) is aborted by the broker:
 * read_committed readers then get past it, and the late commit of its producer fails.
 */
scenarios['txn-timeout'] = async () => {
  const topic = opts.topic
  const tp = producer({ transactionalId: `${topic}-txid`, idempotent: true,
    maxInFlightRequests: 1, transactionTimeout: Number(opts['txn-timeout-ms'] || 1000) })
  await tp.connect()
  const plain = producer()
  await plain.connect()
  const txn = await tp.transaction()
  out.sentTxn = sendResult(await txn.send({ topic, acks: -1,
    messages: [{ partition: 0, value: 'abandoned' }] }))
  out.sentAfter = sendResult(await plain.send({ topic, acks: -1,
    messages: [{ partition: 0, value: 'after' }] }))
  const started = Date.now()
  const res = await consumeGroup({ groupId: `${topic}-rc`, topics: [topic], count: 1,
    graceMs: 300, commit: 'none', timeoutMs: Number(opts['timeout-ms'] || 20000) })
  out.unblockedAfterMs = Date.now() - started
  out.readCommitted = res.records.map(r => [r.offset, r.value])
  out.readTimedOut = res.timedOut
  out.lateCommit = await attempt(() => txn.commit())
  const adm = admin()
  await adm.connect()
  out.offsets = offsetsOf(await adm.fetchTopicOffsets(topic))
  out.ok = true
}

/** One send, for error paths: --size bytes of value, --gzip, --acks, --auto-create. */
scenarios['send-one'] = async () => {
  const p = producer({ allowAutoTopicCreation: opts['auto-create'] === 'true',
    retry: { initialRetryTime: 100, maxRetryTime: 500, retries: Number(opts.retries || 2) } })
  await p.connect()
  const size = Number(opts.size || 10)
  const started = Date.now()
  out.send = await attempt(async () => sendResult(await p.send({
    topic: opts.topic,
    acks: Number(opts.acks || -1),
    timeout: 5000,
    compression: opts.gzip === 'true' ? CompressionTypes.GZIP : CompressionTypes.None,
    messages: [{ key: 'k', value: 'x'.repeat(size) }],
  })))
  out.elapsedMs = Date.now() - started
  if (opts['check-topic'] === 'true') {
    const adm = admin()
    await adm.connect()
    out.topicListed = (await adm.listTopics()).includes(opts.topic)
  }
  out.ok = true
}

/**
 * Fetch from an offset outside [log start, high watermark): the broker answers
 * OFFSET_OUT_OF_RANGE and kafkajs resets to its default offset (earliest with fromBeginning).
 * --produce N records go to partition 0 first; records below --delete-before are then deleted,
 * so both ends of the range can be exercised.
 */
scenarios['fetch-out-of-range'] = async () => {
  const topic = opts.topic
  const seekTo = String(opts.seek)
  const adm = admin()
  await adm.connect()
  if (opts.produce) {
    const p = producer()
    await p.connect()
    out.sent = sendResult(await p.send({ topic, acks: -1, messages: Array.from(
      { length: Number(opts.produce) }, (_, i) => ({ partition: 0, value: `r${i}` })) }))
    await p.disconnect()
  }
  if (opts['delete-before']) {
    // deleteTopicRecords needs the topic's metadata already loaded in the admin.
    await adm.fetchTopicOffsets(topic)
    await adm.deleteTopicRecords({ topic, partitions: [{ partition: 0,
      offset: String(opts['delete-before']) }] })
  }
  out.offsets = offsetsOf(await adm.fetchTopicOffsets(topic))
  const expected = Number(opts.count)
  let seeked = false
  const res = await consumeGroup({
    groupId: opts.group,
    topics: [topic],
    count: expected,
    commit: 'none',
    fromBeginning: opts['from-beginning'] !== 'false',
    graceMs: 500,
    timeoutMs: 15000,
    afterRun: async c => {
      c.seek({ topic, partition: 0, offset: seekTo })
      seeked = true
    },
  })
  out.seeked = seeked
  out.records = res.records.map(r => r.offset)
  out.timedOut = res.timedOut
  out.crashes = res.crashes
  out.outOfRangeLogs = logs.filter(l => /Offset out of range/.test(l.message)).length
  out.ok = true
}

/**
 * Over whatever listener the security flags select: create --topic (--partitions), send
 * --count records, read them back in group --group. What a secured client does first.
 */
scenarios['round-trip'] = async () => {
  const topic = opts.topic
  const count = Number(opts.count)
  const adm = admin()
  await adm.connect()
  out.created = await adm.createTopics({ waitForLeaders: true,
    topics: [{ topic, numPartitions: Number(opts.partitions || 1), replicationFactor: 1 }] })
  const p = producer()
  await p.connect()
  out.results = sendResult(await p.send({ topic, acks: -1,
    messages: Array.from({ length: count }, (_, i) => ({ key: `k${i % 7}`, value: `v${i}` })) }))
  await p.disconnect()
  mark('produced')
  const res = await consumeGroup({ groupId: opts.group, topics: [topic], count })
  out.records = res.records.map(r => ({ partition: r.partition, offset: r.offset,
    value: r.value }))
  out.timedOut = res.timedOut
  out.crashes = res.crashes
  out.ok = !res.timedOut
}

/** Connect an admin client and describe the cluster; a failure (a wrong password) is data. */
scenarios.connect = async () => {
  const adm = admin()
  out.connect = await attempt(async () => {
    await adm.connect()
    return await adm.describeCluster()
  })
  out.ok = true
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const fn = scenarios[scenario]
  if (!fn || !opts.bootstrap) {
    out.error = { name: 'usage', message: `usage: driver.js <${Object.keys(scenarios)
      .join('|')}> --bootstrap HOST:PORT [...]` }
    return finish(2)
  }
  const deadlineMs = Number(opts['deadline-ms'] || 60000)
  const watchdog = setTimeout(() => {
    out.error = { name: 'DriverTimeout', message: `scenario still running after ${deadlineMs} ms` }
    finish(3)
  }, deadlineMs)
  try {
    await fn()
  } catch (e) {
    out.ok = false
    out.error = errInfo(e)
  }
  clearTimeout(watchdog)
  // Close whatever is still open, bounded: a hung disconnect must not hide the result.
  await Promise.race([
    Promise.all(toClose.map(c => c.disconnect().catch(() => {}))),
    sleep(3000),
  ])
  finish(0)
}

main()

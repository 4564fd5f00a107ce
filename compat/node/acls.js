'use strict'
// kafkajs's ACL admin calls (admin.createAcls / describeAcls / deleteAcls) against a broker whose
// authorizer is on.  Two phases, each its own run, so the caller can look at the bindings with
// another client in between:
//
//   node acls.js --brokers host:port --prefix p --phase create|delete|describe [-v]
//
//   create: LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, then four describes;
//   delete: delete them with MATCH filters, then describe again;
//   describe: only the describes (on a cluster the test first waits for every broker to learn
//   the change, then describes in a run of its own).
//
// Prints one JSON object (as compat/go/cmd/franzgo/acls.go, so one Python check judges both);
// a binding is "TYPE|name|PATTERN|principal|host|OPERATION|PERMISSION".  Every principal and
// resource name starts with --prefix.  Exit status 2 with the error on stderr when a call failed.
const { Kafka, AclResourceTypes: RT, AclOperationTypes: OP, AclPermissionTypes: PERM, ResourcePatternTypes: PT,
  logLevel } = require('kafkajs')
const scen = require('./lib/scen')

const SETTLE_MS = 15000
const opts = scen.parseArgs(process.argv.slice(2), { phase: 'create' })
const nameOf = (enumObj, v) => Object.keys(enumObj).find(k => enumObj[k] === v) || String(v)
const key = a => [nameOf(RT, a.resourceType), a.resourceName, nameOf(PT, a.resourcePatternType), a.principal, a.host,
  nameOf(OP, a.operation), nameOf(PERM, a.permissionType)].join('|')

async function main () {
  const p = opts.prefix
  const alice = `User:${p}-alice`
  const bob = `User:${p}-bob`
  const kafka = new Kafka({ clientId: 'pykbroker-compat-kafkajs-acls', brokers: opts.brokers.split(','),
    logLevel: opts.verbose ? logLevel.INFO : logLevel.WARN, retry: { retries: 3 } })
  const anyFilter = { resourceType: RT.ANY, resourcePatternType: PT.ANY, operation: OP.ANY, permissionType: PERM.ANY }
  // filter name -> the describe filters whose results together answer it
  const filters = {
    alice_allow: [{ ...anyFilter, principal: alice, permissionType: PERM.ALLOW }],
    topic_match: [{ ...anyFilter, resourceType: RT.TOPIC, resourceName: `${p}-t`, resourcePatternType: PT.MATCH }],
    group_prefixed_deny_bob: [{ ...anyFilter, resourceType: RT.GROUP, resourcePatternType: PT.PREFIXED,
      principal: bob, permissionType: PERM.DENY }],
    alice_bob: [{ ...anyFilter, principal: alice }, { ...anyFilter, principal: bob }]
  }
  const res = { created: [], create_errors: [], described: {}, deleted: {}, delete_errors: [], invalid_create_error: '' }
  return scen.withAdmin(kafka, async admin => {
    const describeOne = async name => {
      const got = []
      for (const f of filters[name]) {
        const { resources } = await admin.describeAcls(f)
        for (const r of resources) {
          for (const a of r.acls) got.push(key({ ...r, ...a }))
        }
      }
      return got.sort()
    }
    // Apache Kafka answers CreateAcls / DeleteAcls once its controller committed the change; its
    // broker's authorizer applies it from the metadata log a moment later.  So each phase first
    // looks (every 50 ms, at most SETTLE_MS) until the run's bindings are what it left (want),
    // then describes every filter: the same steps against either broker (compat/go: scen.ACLSettle).
    const describeAll = async () => {
      for (const name of Object.keys(filters)) res.described[name] = await describeOne(name)
    }
    const describe = async want => {
      const deadline = Date.now() + SETTLE_MS
      want = JSON.stringify([...want].sort())
      while (JSON.stringify(await describeOne('alice_bob')) !== want && Date.now() < deadline) {
        await new Promise(resolve => setTimeout(resolve, 50))
      }
      await describeAll()
    }
    if (opts.phase === 'create') {
      const acl = [
        { resourceType: RT.TOPIC, resourceName: `${p}-t`, resourcePatternType: PT.LITERAL, principal: alice, host: '*',
          operation: OP.READ, permissionType: PERM.ALLOW },
        { resourceType: RT.TOPIC, resourceName: `${p}-t`, resourcePatternType: PT.LITERAL, principal: alice, host: '*',
          operation: OP.WRITE, permissionType: PERM.ALLOW },
        { resourceType: RT.TOPIC, resourceName: `${p}-`, resourcePatternType: PT.PREFIXED, principal: bob,
          host: '127.0.0.1', operation: OP.WRITE, permissionType: PERM.DENY },
        { resourceType: RT.GROUP, resourceName: `${p}-g`, resourcePatternType: PT.LITERAL, principal: alice, host: '*',
          operation: OP.READ, permissionType: PERM.ALLOW },
        { resourceType: RT.GROUP, resourceName: `${p}-`, resourcePatternType: PT.PREFIXED, principal: bob, host: '*',
          operation: OP.DESCRIBE, permissionType: PERM.DENY }
      ]
      // kafkajs answers true or throws the first binding's error: all were created or the run fails
      try {
        await admin.createAcls({ acl })
        res.created = acl.map(key).sort()
      } catch (e) {
        res.create_errors.push(String(e))
      }
      // a creation the broker must refuse (a principal without its type: INVALID_REQUEST)
      try {
        await admin.createAcls({ acl: [{ resourceType: RT.TOPIC, resourceName: `${p}-bad`, resourcePatternType: PT.LITERAL,
          principal: `${p}-nocolon`, host: '*', operation: OP.READ, permissionType: PERM.ALLOW }] })
      } catch (e) {
        res.invalid_create_error = `${e.name} ${e.type || ''}: ${e.message}`
      }
      await describe(res.created)
    } else if (opts.phase === 'delete') {
      const deletes = {
        topic_match: filters.topic_match[0],
        group_match: { ...anyFilter, resourceType: RT.GROUP, resourceName: `${p}-g`, resourcePatternType: PT.MATCH }
      }
      for (const [name, f] of Object.entries(deletes)) {
        const { filterResponses } = await admin.deleteAcls({ filters: [f] })
        const got = []
        for (const fr of filterResponses) {
          if (fr.errorCode) res.delete_errors.push(`${name}: ${fr.errorCode} ${fr.errorMessage}`)
          for (const m of fr.matchingAcls) {
            if (m.errorCode) res.delete_errors.push(`${name}: ${m.errorCode} ${m.errorMessage}`)
            got.push(key(m))
          }
        }
        res.deleted[name] = got.sort()
      }
      await describe([])
    } else if (opts.phase === 'describe') {
      await describeAll()
    } else {
      scen.fail('unknown --phase %s', opts.phase)
    }
    return res
  })
}

main().then(r => { process.stdout.write(JSON.stringify(r) + '\n') },
  e => { process.stderr.write('kafkajs acls: ' + (e && e.stack ? e.stack : e) + '\n'); process.exit(2) })

'use strict'
// The dashboard's page: polls api/state every second and renders it with DOM calls only (every name and message
// goes in as text, never as markup). Actions post with the CSRF token the page was served with.
;(() => {
  const POLL_MS = 1000
  const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? null
  const $ = (id) => document.getElementById(id)
  let state = null
  let selected = null
  let history = null

  /** An element `tag` with `text`, class `className` and the given attributes. */
  function el(tag, text, className, attrs) {
    const node = document.createElement(tag)
    if (text !== undefined && text !== null) node.textContent = String(text)
    if (className) node.className = className
    for (const [name, value] of Object.entries(attrs ?? {})) node.setAttribute(name, value)
    return node
  }

  function row(cells) {
    const tr = document.createElement('tr')
    for (const cell of cells) {
      const td = document.createElement('td')
      if (cell instanceof Node) td.append(cell)
      else if (Array.isArray(cell)) td.append(...cell)
      else td.textContent = cell ?? ''
      tr.append(td)
    }
    return tr
  }

  const localTime = (ms) => (ms === null ? '—' : new Date(ms).toLocaleString())

  /** `ms` as a short duration: 850 ms, 12.3 s, 4 min 5 s, 2 h 3 min. */
  function duration(ms) {
    if (ms === null || ms === undefined) return '—'
    if (ms < 1) return '<1 ms'
    if (ms < 1000) return `${Math.round(ms)} ms`
    if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
    if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.floor((ms % 60_000) / 1000)} s`
    if (ms < 86_400_000) return `${Math.floor(ms / 3_600_000)} h ${Math.floor((ms % 3_600_000) / 60_000)} min`
    return `${Math.floor(ms / 86_400_000)} d ${Math.floor((ms % 86_400_000) / 3_600_000)} h`
  }

  const MACROS = {
    '@yearly': 'once a year, on 1 January at 00:00',
    '@annually': 'once a year, on 1 January at 00:00',
    '@monthly': 'once a month, on the 1st at 00:00',
    '@weekly': 'once a week, on Sunday at 00:00',
    '@daily': 'once a day, at 00:00',
    '@midnight': 'once a day, at 00:00',
    '@hourly': 'once an hour, at minute 0',
  }
  const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday']
  const pad = (n) => String(n).padStart(2, '0')

  /** A cron expression in words, for the common shapes; the expression itself otherwise. */
  function cronWords(cron) {
    if (MACROS[cron]) return MACROS[cron]
    const fields = cron.trim().split(/\s+/)
    const [sec, min, hour, dom, month, dow] = fields.length === 6 ? fields : ['0', ...fields]
    const every = (field) => /^\*\/(\d+)$/.exec(field)?.[1]
    const num = (field) => (/^\d+$/.test(field) ? Number(field) : null)
    const rest = dom === '*' && month === '*'
    if (fields.length === 6 && rest && dow === '*' && min === '*' && hour === '*') {
      if (sec === '*') return 'every second'
      if (every(sec)) return `every ${every(sec)} seconds`
    }
    if (num(sec) === 0 && rest && dow === '*') {
      if (min === '*' && hour === '*') return 'every minute'
      if (every(min) && hour === '*') return `every ${every(min)} minutes`
      if (num(min) !== null && hour === '*') return `every hour at minute ${num(min)}`
      if (num(min) !== null && every(hour)) return `every ${every(hour)} hours at minute ${num(min)}`
      if (num(min) !== null && num(hour) !== null) return `every day at ${pad(num(hour))}:${pad(num(min))}`
    }
    if (num(sec) === 0 && rest && num(dow) !== null && num(min) !== null && num(hour) !== null) {
      return `every ${DAYS[num(dow)]} at ${pad(num(hour))}:${pad(num(min))}`
    }
    return `cron ${cron}`
  }

  function outcomeOf(record) {
    if (!record) return el('span', 'never', 'muted')
    return el('span', record.outcome, `outcome outcome-${record.outcome}`)
  }

  /** Marks of how an attempt came to run, when not on time. */
  function whyTags(record) {
    const tags = []
    if (record.why && record.why !== 'on-time') tags.push(el('span', record.why, 'tag'))
    if (record.attempt > 1) tags.push(el('span', `attempt ${record.attempt}`, 'tag'))
    return tags
  }

  async function post(route, body) {
    const res = await fetch(route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(body),
    })
    const answer = await res.json().catch(() => ({}))
    if (!res.ok) window.alert(answer.error ?? `failed: ${res.status}`)
    await poll()
  }

  /** A button; `title` also names it for keeping the focus on it across renders. */
  function actionButton(label, title, onClick, danger) {
    const button = el('button', label, danger ? 'danger' : undefined, { type: 'button', title, 'data-focus': title })
    button.addEventListener('click', onClick)
    return button
  }

  /** A schedule's buttons (code or stored, by `name`): trigger, and suspend or resume; none on a read-only page. */
  function scheduleActions(name, suspended) {
    if (!state.actions) return []
    return [
      actionButton('trigger', `run ${name} once now`, () => post('api/trigger', { name })),
      suspended
        ? actionButton('resume', `resume ${name}`, () => post('api/resume', { name }))
        : actionButton('suspend', `suspend ${name}`, () => post('api/suspend', { name })),
    ]
  }

  function renderSchedules() {
    const body = $('schedules').tBodies[0]
    const rows = state.schedules.map((s) => {
      // A link, not a button: a read-only page has no buttons at all.
      const name = el('a', s.name, 'name', { href: `#${encodeURIComponent(s.name)}`, title: `show ${s.name}'s runs`, 'data-focus': `runs of ${s.name}` })
      name.setAttribute('aria-expanded', String(selected === s.name))
      name.addEventListener('click', (event) => {
        event.preventDefault()
        select(s.name)
      })
      const when = [el('div', cronWords(s.cron)), el('div', `${s.cron} (${s.timezone})`, 'muted')]
      const next = s.next === null ? '—' : [
        el('div', `in ${duration(Math.max(0, s.next - Date.now()))}`, 'countdown', { 'data-at': String(s.next) }),
        el('div', s.upcoming.map(localTime).join(' · '), 'muted'),
      ]
      const last = s.last
        ? [outcomeOf(s.last), ...whyTags(s.last), el('div', `${s.last.instance ?? '—'} · ${duration(s.last.durationMs)} · ${localTime(s.last.started ?? s.last.tick)}`, 'muted')]
        : outcomeOf(null)
      const stateCell = [
        s.suspended ? el('span', 'suspended', 'tag outcome-missed') : el('span', 'active', 'tag'),
        ...s.running.map((r) => el('span', `running on ${r.instance ?? '?'}`, 'tag outcome-running')),
      ]
      const actions = scheduleActions(s.name, s.suspended)
      const health = el('span', s.health, `tag health health-${s.health}`)
      const tr = row([name, when, next, last, s.replicas.join(', '), stateCell, health, actions])
      tr.lastChild.className = 'actions-column'
      tr.dataset.name = s.name
      if (s.name === selected) tr.className = 'selected'
      return tr
    })
    body.replaceChildren(...rows)
    $('no-schedules').hidden = state.schedules.length > 0
  }

  /** The page of stored schedules shown (`api/stored`), the cursor it was read from, and its next one. */
  let stored = { schedules: [], handlers: [], cursor: null }
  let storedFrom = null

  async function loadStored() {
    const query = storedFrom === null ? '' : `?cursor=${encodeURIComponent(storedFrom)}`
    const res = await fetch(`api/stored${query}`, { cache: 'no-store' })
    if (res.ok) stored = await res.json()
  }

  function renderStored() {
    const rows = stored.schedules.map((s) => {
      const when = s.cron ? [el('div', cronWords(s.cron)), el('div', `${s.cron} (${s.timezone})`, 'muted')] : s.every ? `every ${duration(s.every)}` : `at ${localTime(s.at)}`
      const next = s.next === null ? '—' : el('div', `in ${duration(Math.max(0, s.next - Date.now()))}`, 'countdown', { 'data-at': String(s.next) })
      const last = s.last ? [outcomeOf(s.last), ...whyTags(s.last)] : outcomeOf(null)
      const stateCell = s.suspended ? el('span', 'suspended', 'tag outcome-missed') : el('span', s.finished ? 'finished' : 'active', 'tag')
      const actions = scheduleActions(s.id, s.suspended)
      const health = el('span', s.health, `tag health health-${s.health}`)
      const tr = row([s.id, s.handler, when, next, last, String(s.runs), stateCell, health, actions])
      tr.lastChild.className = 'actions-column'
      return tr
    })
    $('stored').tBodies[0].replaceChildren(...rows)
    $('no-stored').hidden = stored.schedules.length > 0
    $('stored-next').hidden = stored.cursor === null
    $('stored-first').hidden = storedFrom === null
    $('stored-handlers').textContent = stored.handlers
      .map((h) => `${h.handler}: ${h.schedules} schedules, ${h.overdue} overdue, ${h.runners} runners`)
      .join(' · ')
  }

  function renderLocks() {
    const filter = $('filter').value.trim().toLowerCase()
    const shown = state.locks.filter((l) => !filter || l.key.toLowerCase().includes(filter) || (l.holder ?? '').toLowerCase().includes(filter))
    const rows = shown.map((l) => {
      const actions = state.actions
        ? [actionButton('force release', `delete lock ${l.key} whoever holds it`, () => {
            if (window.confirm(`Force-release lock "${l.key}"? Its holder's signal aborts.`)) post('api/release', { key: l.key })
          }, true)]
        : []
      const tr = row([l.key, l.holder ?? '—', duration(l.ttl), l.fence, actions])
      tr.lastChild.className = 'actions-column'
      tr.dataset.key = l.key
      return tr
    })
    $('locks').tBodies[0].replaceChildren(...rows)
    const capped = state.locks.length >= state.locksLimit ? ` (the first ${state.locksLimit})` : ''
    $('locks-count').textContent = `${shown.length} of ${state.locks.length} locks${capped}`
    // Semaphores: the permits held, of the limit their last acquisition gave.
    const semaphores = (state.semaphores ?? []).filter((s) => !filter || s.key.toLowerCase().includes(filter))
    const semaphoreRows = semaphores.map((s) => {
      const tr = row([s.key, s.limit === null ? `${s.holders}` : `${s.holders} of ${s.limit}`, duration(s.ttl)])
      tr.dataset.key = s.key
      return tr
    })
    $('semaphores').tBodies[0].replaceChildren(...semaphoreRows)
    $('no-semaphores').hidden = semaphores.length > 0
  }

  function renderConnection() {
    const c = state.connection
    const servers = c ? c.servers.map((s) => `${s.name} ${s.version ?? ''} ${s.latencyMs.toFixed(1)} ms`).join(' · ') : ''
    $('connection').textContent = c ? `${c.kind}${servers ? `: ${servers}` : ''}` : 'not connected'
    const banner = $('banner')
    banner.hidden = state.ok
    banner.textContent = state.ok ? '' : `Redis is unreachable (${state.error}); showing what was last read, at ${localTime(state.at)}.`
  }

  const SVG = 'http://www.w3.org/2000/svg'
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag)
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value))
    return node
  }

  /** The last runs as bars, oldest left: height by duration, colour by outcome; late, retried or manual ones marked. */
  function renderTimeline(records) {
    const chart = $('timeline')
    const runs = [...records].reverse()
    const width = 600
    const height = 90
    chart.setAttribute('viewBox', `0 0 ${width} ${height}`)
    chart.setAttribute('preserveAspectRatio', 'none')
    const longest = Math.max(1, ...runs.map((r) => r.durationMs ?? 0))
    // At most 24 units a run, so that a few runs do not fill the chart.
    const slot = Math.min(24, width / Math.max(runs.length, 1))
    const bars = runs.map((r, i) => {
      const h = r.durationMs === null ? 6 : Math.max(4, ((r.durationMs ?? 0) / longest) * (height - 14))
      const group = svg('g', {})
      const bar = svg('rect', { x: i * slot + 1, y: height - h, width: Math.max(1, slot - 2), height: h, class: `bar-${r.outcome}` })
      const title = svg('title', {})
      title.textContent = `${localTime(r.tick)}: ${r.outcome}, ${duration(r.durationMs)}${r.why !== 'on-time' ? `, ${r.why}` : ''}${r.attempt > 1 ? `, attempt ${r.attempt}` : ''}`
      bar.append(title)
      group.append(bar)
      if (r.why !== 'on-time' || r.attempt > 1) {
        group.append(svg('rect', { x: i * slot + 1, y: 1, width: Math.max(1, slot - 2), height: 6, class: 'mark' }))
      }
      return group
    })
    chart.replaceChildren(...bars)
    $('legend').textContent = `${runs.length} runs, oldest left; bar height: duration (longest ${duration(longest)}); colour: outcome; a band on top: late, retried or manual.`
  }

  function renderDetail() {
    const section = $('detail')
    section.hidden = selected === null
    if (selected === null || history === null || history.name !== selected) return
    $('detail-title').textContent = `${selected}: the last runs`
    renderTimeline(history.records)
    const rows = history.records.map((r) =>
      row([
        localTime(r.tick),
        r.attempt,
        [r.why, ...(r.manual ? [' ', el('span', 'manual', 'tag')] : [])],
        [outcomeOf(r), ...(r.reason ? [el('div', r.reason, 'muted')] : [])],
        r.instance ?? '—',
        localTime(r.started),
        duration(r.durationMs),
        r.fence ?? '—',
        r.error ?? '',
      ]),
    )
    $('records').tBodies[0].replaceChildren(...rows)
  }

  async function loadHistory() {
    if (selected === null) return
    const res = await fetch(`api/history?name=${encodeURIComponent(selected)}`)
    if (res.ok) history = await res.json()
  }

  async function select(name) {
    selected = selected === name ? null : name
    history = null
    await loadHistory()
    render()
  }

  function render() {
    if (!state) return
    // Rows are made anew each time: the keyboard's focus goes back to the same button.
    const focused = document.activeElement?.dataset?.focus
    document.body.classList.toggle('actions', state.actions)
    renderConnection()
    renderSchedules()
    renderStored()
    renderLocks()
    renderDetail()
    if (focused) document.querySelector(`[data-focus="${CSS.escape(focused)}"]`)?.focus()
  }

  let polling = null
  async function poll() {
    if (polling) return polling
    polling = (async () => {
      try {
        const res = await fetch('api/state', { cache: 'no-store' })
        state = await res.json()
        await Promise.all([loadHistory(), loadStored()])
      } catch (err) {
        state = { ...(state ?? { schedules: [], locks: [], locksLimit: 0, actions: false }), ok: false, error: `the dashboard did not answer (${err.message})` }
      }
      render()
    })().finally(() => (polling = null))
    return polling
  }

  // Countdowns tick between polls.
  function tick() {
    for (const node of document.querySelectorAll('.countdown')) {
      node.textContent = `in ${duration(Math.max(0, Number(node.dataset.at) - Date.now()))}`
    }
  }

  $('filter').addEventListener('input', () => state && renderLocks())
  // Links, not buttons: paging is reading, and a read-only page has no buttons.
  $('stored-next').addEventListener('click', (event) => {
    event.preventDefault()
    storedFrom = stored.cursor
    poll()
  })
  $('stored-first').addEventListener('click', (event) => {
    event.preventDefault()
    storedFrom = null
    poll()
  })
  poll()
  setInterval(poll, POLL_MS)
  setInterval(tick, 250)
})()

// Package web is `ralph web` (DESIGN §24): server-rendered pages of a
// store's or a fleet's runs, read through the same sources as ralph mcp
// (package runsource: the store, through its socket while a ralph holds
// it, or a fleet over NATS), with live updates by Server-Sent Events from
// the run's event stream, the one the TUI follows.
//
// Pages: / (runs; ?state= and ?q= filter), /runs/{id} (a unique prefix or
// latest redirects to the id), /runs/{id}/events (text/event-stream),
// /runs/{id}/diff?iteration=N, /runs/{id}/verify, POST /runs/{id}/control
// (do=pause|resume|skip|abort|approve|decline, iteration=N), POST
// /runs/{id}/whatif (config=[[stop]] TOML), /fleet. Every page asks for
// JSON answers with Accept: application/json; errors are then
// {"error": "..."}.
//
// Invariants:
//   - Every request but the embedded assets' needs the token: ?token= on a
//     GET (answered with a session cookie, named per port, HttpOnly,
//     SameSite=Strict, holding a session id and never the token, and a
//     redirect that drops the token from the address), Authorization:
//     Bearer TOKEN, or that cookie. Without one: 401.
//   - The Host header must name loopback or the listen host (any host when
//     listening on every address, which needs TLS), against DNS rebinding.
//   - A state-changing request with the cookie must be same-origin
//     (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin) and
//     carry its session's CSRF token as the form field csrf; a Bearer
//     request needs neither.
//   - The what-if form replays the recorded run (assemble.Replay without
//     Rerun): no command runs from a page.
//   - Every browser following one live run shares one stream of its
//     process (a hub, ended with its last browser): the process serves
//     one socket stream whatever the number of pages.
//   - A browser's stream holds at most Options.SSEBuffer events (and
//     256 KiB of them); one that
//     falls further behind is sent one snapshot event (and its page
//     reloads), never an unbounded queue. An event's id is its action's
//     seq: Last-Event-ID resumes after it. An ended run's stream replays
//     its actions, sends end and closes.
//   - A page shows what the store recorded, which holds no secret (the
//     loop redacts before recording); no config or environment is read.
//
// Selectors tests and users may rely on (kept stable):
//
//	runs page:  form#filter (select[name=state], input[name=q]), table#runs,
//	            tr[data-run=ID][data-state=STATE] (tr.task[data-batch=BATCH]
//	            for a batch's tasks, tr.batch for the batch), #count, #no-runs
//	run page:   #run[data-run][data-live][data-head], #state, #summary,
//	            #stopped, #notice, #controls form button[name=do][value=pause|
//	            resume|skip|abort], #approve button[name=do][value=approve|
//	            decline], #conditions li[data-condition=NAME][data-met]
//	            (.verdict, .why), #budgets .budget[data-condition=NAME]
//	            [role=progressbar], #verify .verify-status[data-ok],
//	            a#verify-now, pre#output, ol#chain li.iteration
//	            [data-iteration=N] (a.diff-link), li[data-seq=S][data-type=T],
//	            li.folded[data-folded=N] (a long run's older iterations, with
//	            input#focus-iteration to show one),
//	            #whatif form (textarea[name=config]), #whatif-result
//	            [data-stopped][data-iteration][data-condition][data-class],
//	            #whatif-error
//	diff page:  section#diff[data-iteration], table#files tr[data-file],
//	            pre.diff, #diff-note, a#prev, a#next
//	fleet page: #workers tr[data-worker], #running, #queued, #failovers
//	            tr[data-run], #no-fleet
//	any error:  #error
//
// Stream events: action (id = seq; data {seq,type,label,detail,failed,end}),
// conditions, state, output ({call,text}), approve, snapshot, hello, end,
// unavailable ({why}: a live run whose process gave no stream; the page
// stops following and says so in #live-unavailable).
package web

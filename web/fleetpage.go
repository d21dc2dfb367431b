package web

import (
	"net/http"
	"time"

	"github.com/ralphloop/ralph/fleet"
)

// fleetView is the fleet page.
type fleetView struct {
	NoFleet   string // why there is no fleet to show
	Workers   []workerRow
	Queued    []fleet.RunState
	Running   []fleet.RunState
	Failovers []fleet.RunState
}

// workerRow is one worker heartbeating now.
type workerRow struct {
	fleet.WorkerState
	Busy      int
	Heartbeat string
}

// fleetPage is /fleet: the workers with their slots, the queued and
// running jobs, and the runs that moved to another worker.
func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) {
	fv, ok := s.o.Source.(fleetViewer)
	if !ok {
		s.render(w, r, http.StatusOK, "fleet", fleetView{NoFleet: "ralph web reads " + s.o.Where + ", which is no fleet; start it with --nats URL to see a fleet's workers and jobs"})
		return
	}
	states, workers, err := fv.Overview(r.Context())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	v := fleetView{}
	for _, wk := range workers {
		v.Workers = append(v.Workers, workerRow{WorkerState: wk, Busy: len(wk.Runs), Heartbeat: wk.Heartbeat.Local().Format(time.TimeOnly)})
	}
	for _, st := range states {
		switch st.State {
		case fleet.StateQueued, fleet.StateHandedBack:
			v.Queued = append(v.Queued, st)
		case fleet.StateRunning:
			v.Running = append(v.Running, st)
		}
		if st.Deliveries > 1 {
			v.Failovers = append(v.Failovers, st)
		}
	}
	if wantsJSON(r) {
		writeJSON(w, v)
		return
	}
	s.render(w, r, http.StatusOK, "fleet", v)
}

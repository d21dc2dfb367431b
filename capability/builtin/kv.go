package builtin

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// KV is durable key/value storage that outlives iterations and runs; the
// ledger provides it. A plan's keys live under ledger.KVUser, so kv.* can
// neither read nor forge ralph's own records kept in the same table. Under
// the orchestrator a call's Put is staged in its context (ledger.StageKV)
// and commits with the CapabilityCall that records the call, so the kv
// never holds an effect the chain does not account for.
type KV interface {
	Get(ctx context.Context, key string) (rtfs.Value, bool, error)
	Put(ctx context.Context, key string, v rtfs.Value) error
}

// kvRows are kv.get and kv.put, offered in a run whose host has a KV.
func kvRows() []row {
	handler := func(m func(KV) capability.Handler) func(h *host) capability.Handler {
		return func(h *host) capability.Handler {
			if h.KV == nil {
				return nil
			}
			return m(h.KV)
		}
	}
	return []row{
		{
			spec: &capability.Spec{
				ID: "kv.get", Version: "1.0.0", Description: "Read a value stored with kv.put (nil when absent).",
				Input:        rtfs.MustParseType("[:map [:key :string]]"),
				Output:       rtfs.MustParseType(":any"),
				Effects:      []capability.Effect{{Kind: "kv", Params: rtfs.NewMap(rtfs.Keyword("read"), rtfs.True)}},
				Risk:         capability.RiskLow,
				Examples:     []string{`(call :kv.get {:key "attempts"})`},
				EchoesStored: true,
			},
			handler: handler(kvGet),
		},
		{
			spec: &capability.Spec{
				ID: "kv.put", Version: "1.0.0", Description: "Store a value under a key, across iterations and runs.",
				Input:        rtfs.MustParseType("[:map [:key :string] [:value :any]]"),
				Output:       rtfs.MustParseType(":any"),
				Effects:      []capability.Effect{{Kind: "kv", Params: rtfs.NewMap(rtfs.Keyword("write"), rtfs.True)}},
				Risk:         capability.RiskLow,
				Examples:     []string{`(call :kv.put {:key "attempts" :value 3})`},
				StoresResult: true,
			},
			handler: handler(kvPut),
		},
	}
}

func kvGet(kv KV) capability.Handler {
	return func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
		key := in.AsMap().GetKey("key").Str()
		v, _, err := kv.Get(ctx, ledger.UserKVKey(key))
		if err != nil {
			return capability.Result{}, fmt.Errorf("kv.get %q: %w", key, err)
		}
		return capability.Result{Value: v}, nil
	}
}

func kvPut(kv KV) capability.Handler {
	return func(ctx context.Context, in rtfs.Value) (capability.Result, error) {
		m := in.AsMap()
		key, v := m.GetKey("key").Str(), m.GetKey("value")
		if v.Kind() == rtfs.KindFn {
			return capability.Result{}, fmt.Errorf("kv.put %q: functions cannot be stored", key)
		}
		if err := kv.Put(ctx, ledger.UserKVKey(key), v); err != nil {
			return capability.Result{}, fmt.Errorf("kv.put %q: %w", key, err)
		}
		return capability.Result{Value: v}, nil
	}
}

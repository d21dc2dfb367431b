package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"
)

// Options configure a Store. The zero value (plus Dir or InMemory) is a
// store tuned for a CLI: small memtables and cache, value-log GC every ten
// minutes, writes acknowledged once Badger has them (set SyncWrites for
// fsync before Append returns).
type Options struct {
	// Dir is the store directory. It is created if missing; an existing
	// directory must be empty or hold a ralph ledger.
	Dir string
	// InMemory keeps everything in memory (tests). Dir must be empty.
	InMemory bool
	// SyncWrites makes every commit fsync before Append returns.
	SyncWrites bool
	// Logger receives the store's and Badger's messages. Nil discards them.
	Logger *slog.Logger
	// PrivateKey signs checkpoints instead of the key file (or, in memory,
	// instead of a fresh ephemeral key).
	PrivateKey ed25519.PrivateKey
	// KeyFile is the private key (PEM PKCS #8) that signs this store's
	// checkpoints; it is created (mode 0600) on the first write if missing.
	// Empty: <KeyDir>/<store id>.ed25519. The store itself records only the
	// public key. A store made before keys moved out keeps signing with the
	// key inside it (keys/ed25519) until MoveLegacyKey moves it.
	KeyFile string
	// KeyDir holds one private key per store (default DefaultKeyDir:
	// $XDG_CONFIG_HOME/ralph/keys).
	KeyDir string
	// WitnessDir, if set, receives the latest checkpoint when a store that
	// was written closes (see witness.go); cli sets DefaultWitnessDir.
	WitnessDir string
	// ReadOnly opens the store for reading: no key is read or created, no
	// file is changed (Badger's read-only mode), and appends are refused.
	ReadOnly bool
	// MemTableSize bounds each Badger memtable (default 32 MiB). One
	// transaction holds at most 15% of it, which caps the size of an action.
	MemTableSize int64
	// BlockCacheSize bounds Badger's block cache (default 16 MiB).
	BlockCacheSize int64
	// GCInterval is how often value-log GC runs (default 10m; negative
	// disables it).
	GCInterval time.Duration
	// LowMemory keeps Badger's own memory small at some cost in write
	// speed: 8 MiB memtables, a 4 MiB block cache, two compactors (Badger's fewest) and small
	// tables (compactions build whole tables in memory). ralph chain import
	// uses it, so that an import of any size stays within a bounded RSS.
	LowMemory bool
	// CloseTimeout bounds Close: Badger gets at most this long to flush
	// and stop (default DefaultCloseTimeout), then Close returns a
	// StuckError and leaves what is on disk as it is.
	CloseTimeout time.Duration
	// OnWitnessError, if set, is called when the witness cannot be
	// written (witness_fail.go), once until it is written again, from the
	// store's goroutines: cli prints it on the run's output.
	OnWitnessError func(*WitnessError)
	// OnCloseStuck, if set, is called with the StuckError when Close
	// passes its bound, before Close returns it (cli prints it and exits:
	// the goroutine inside Badger cannot be stopped).
	OnCloseStuck func(*StuckError)
	// CommitTimeout bounds how long an append waits for its commit
	// (default DefaultCommitTimeout): Badger stalls writes while it cannot
	// flush, forever when the flush keeps failing. Past it the append, and
	// every later one, fails with a StuckError.
	CommitTimeout time.Duration
	// NoCompactions runs no LSM compactions, for a short-lived reader
	// (ralph view) that should not spend memory rewriting tables a writer
	// left behind. Appends may stall on a store opened this way, so only
	// readers should use it.
	NoCompactions bool
}

const (
	defaultMemTableSize   = 32 << 20
	defaultBlockCacheSize = 16 << 20
	defaultGCInterval     = 10 * time.Minute
	valueLogFileSize      = 64 << 20
	inMemoryMaxValue      = 1 << 20 // Badger's default ValueThreshold

	dataDir    = "data"
	markerFile = "LEDGER"
	markerText = "ralph ledger 1\n"
)

// ImportMemoryLimit is the Go heap limit (runtime/debug.SetMemoryLimit) a
// process importing into a LowMemory store should set: the heap then stays
// near the live data (chunks, memtables, table builders) instead of
// growing to twice it between collections.
const ImportMemoryLimit = 128 << 20

// Store is a causal chain on Badger. All methods are safe for concurrent
// use; Close ends it.
type Store struct {
	dir  string
	db   *badger.DB
	priv ed25519.PrivateKey // nil when read-only
	pub  ed25519.PublicKey  // nil when the store records none
	log  *slog.Logger

	id       string      // store id; origin is ralph/<id>
	vkey     string      // the note verifier key the store records
	signer   note.Signer // nil when read-only
	readOnly bool
	keyPath  string // where the private key was read from ("" in memory)

	witnessDir string
	wrote      atomic.Bool // a commit was made since Open
	importing  atomic.Bool // an import's mark stands: no witness is written
	// The witness (witness.go). witnessMu serializes its writes and guards
	// checked (the existing witness was compared with this store), stuck
	// (this store does not extend it: it is kept as evidence) and seq (the
	// checkpoint last written). The writer sets due to the checkpoint of a
	// commit that ended an iteration or a run; next is the one the witness
	// goroutine writes when kicked.
	witnessMu    sync.Mutex
	witness      witnessState
	witnessW     witnessWriter // the witness file, under witnessMu
	witnessDue   *witnessNote
	witnessNext  atomic.Pointer[witnessNote]
	witnessKick  chan struct{}
	onWitnessErr func(*WitnessError) // Options.OnWitnessError

	// Free space (diskspace.go).
	spaceMu sync.Mutex
	space   spaceState
	// The store's place (place.go): placeMu guards place.at; lost is set,
	// and lostCh closed, when the store is found lost.
	placeMu    sync.Mutex
	place      placeState
	lost       atomic.Pointer[LostError]
	lostCh     chan struct{}
	closeLimit time.Duration              // Options.CloseTimeout, defaulted
	onStuck    func(*StuckError)          // Options.OnCloseStuck
	stalled    atomic.Pointer[StuckError] // a commit waited past commitLim
	commitLim  time.Duration              // Options.CommitTimeout, defaulted
	rolledBack uint64                     // actions of an interrupted import Open removed

	// The writer's Merkle tree: the compact range of every committed leaf.
	rf   *compact.RangeFactory
	tree *compact.Range

	// Budget of one transaction, in Badger's own accounting, less room for
	// the head and the checkpoint.
	txnBytes, txnCount int64
	// maxValue bounds one stored value: Badger keeps at most 1 MiB per
	// value in memory mode, and at most a value-log file on disk.
	maxValue int64

	head atomic.Pointer[Head]
	// damaged is set at Open when the head and the stored actions disagree;
	// every append is then refused with it.
	damaged error
	// scratch is the scratch directory a read-only store reads a crashed
	// store through (view.go); nil when Badger reads the store itself.
	scratch *view
	// behind is set when the store holds fewer actions than its witness:
	// it is then open read-only and every append is refused with it.
	behind *BehindError
	// tail is set when the store's logs hold whole commits after damage
	// (waltail.go): it is then open read-only and every append is refused
	// with it.
	tail *TailError

	// The writer: Append sends requests on reqCh while holding sendMu for
	// reading; Close takes it for writing before closing reqCh.
	sendMu     sync.RWMutex
	sendClosed bool
	reqCh      chan *request
	writerDone chan struct{}
	appending  atomic.Int64          // callers inside Append: the writer lingers for them
	deferErr   atomic.Pointer[error] // the first failed deferred append, for Sync

	// Subscribers wait on commitCh, which the writer closes and replaces
	// after every commit; recent holds the last committed actions.
	commitMu sync.Mutex
	commitCh chan struct{}
	recent   *ring
	subWG    sync.WaitGroup

	// done is closed by Close; background goroutines end when it is.
	done chan struct{}
	bgWG sync.WaitGroup
	// gcPasses counts the value-log GC loop's ticks, and gcLoops the GC
	// loops that have not returned (Close waits for them).
	gcPasses atomic.Int64
	gcLoops  atomic.Int32
	readMu   sync.RWMutex // held for reading by every read of db
	closed   bool         // under readMu

	closeOnce sync.Once
	closeErr  error
	closeDone atomic.Bool // Close has returned
}

// LockedError reports a store that another process has open.
type LockedError struct {
	Dir string
	PID int // 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("ledger store %s is in use by process %d; stop that process or pass another --store", e.Dir, e.PID)
	}
	return fmt.Sprintf("ledger store %s is in use by another process; stop it or pass another --store", e.Dir)
}

// NotStoreError reports a directory that cannot hold a ledger store: a
// file, a directory holding something else, or a store of another format.
// It is the caller's choice of directory that is wrong, not the store.
type NotStoreError struct{ Msg string }

func (e *NotStoreError) Error() string { return e.Msg }

// Errors callers branch on.
var (
	ErrClosed   = errors.New("ledger store is closed")
	ErrNotFound = errors.New("not found in the ledger")
)

// Open opens (creating if needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.InMemory == (opts.Dir != "") {
		return nil, errors.New("open ledger: set exactly one of Options.Dir and Options.InMemory")
	}
	bopts, err := badgerOptions(opts, log)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:        opts.Dir,
		log:        log,
		reqCh:      make(chan *request, 1024),
		writerDone: make(chan struct{}),
		commitCh:   make(chan struct{}),
		recent:     newRing(4096),
		done:       make(chan struct{}),
		lostCh:     make(chan struct{}),
		closeLimit: opts.CloseTimeout,
		onStuck:    opts.OnCloseStuck,
	}
	if s.closeLimit <= 0 {
		s.closeLimit = DefaultCloseTimeout
	}
	if s.commitLim = opts.CommitTimeout; s.commitLim <= 0 {
		s.commitLim = DefaultCommitTimeout
	}
	if !opts.InMemory {
		if bopts, err = s.placeDir(opts, bopts); err != nil {
			return nil, err
		}
	}
	if behind, err := s.openDB(opts, bopts); err != nil || behind != nil {
		return behind, err
	}
	if err := s.initSafe(opts); err != nil {
		if cerr := s.db.Close(); cerr != nil {
			log.Error("close ledger after failed open", "err", cerr)
		}
		s.scratch.close()
		return nil, err
	}
	s.startBackground(opts)
	return s, nil
}

// placeDir makes the store's directory absolute, checks it (a reader) or
// prepares it (a writer, which also removes the empty logs a crash can
// leave), and points Badger at its data directory.
func (s *Store) placeDir(opts Options, bopts badger.Options) (badger.Options, error) {
	if abs, err := filepath.Abs(opts.Dir); err == nil {
		s.dir = abs
	}
	if opts.ReadOnly {
		if err := checkStoreDir(s.dir); err != nil {
			return bopts, err
		}
	} else if err := prepareDir(s.dir); err != nil {
		return bopts, err
	}
	data := filepath.Join(s.dir, dataDir)
	bopts = bopts.WithDir(data).WithValueDir(data)
	if !opts.ReadOnly {
		if err := removeEmptyLogs(data, s.log); err != nil {
			return bopts, err
		}
	}
	return bopts, nil
}

// openDB opens Badger: in memory; through a view of the store's files (a
// reader); or, for a writer, after the store was compared with its
// witness and its logs were read for damage Badger would cut (such a store
// is returned, open read-only) and the disk was found to have room.
func (s *Store) openDB(opts Options, bopts badger.Options) (behind *Store, err error) {
	switch {
	case opts.InMemory:
		s.db, err = openBadger(bopts, s.dir)
	case opts.ReadOnly:
		// Never Badger's writer here: it would cut the logs a crash left.
		s.db, s.scratch, err = openView(bopts, s.dir, filepath.Join(s.dir, dataDir))
	default:
		if opts.WitnessDir != "" || hasLog(filepath.Join(s.dir, dataDir)) {
			behind, err := checkBeforeWrite(opts, s.dir)
			if err != nil || behind != nil {
				return behind, err
			}
		}
		if err := checkSpaceToOpen(s.dir); err != nil {
			return nil, err
		}
		s.db, err = openBadger(bopts, s.dir)
	}
	if err != nil {
		s.scratch.close()
		return nil, err
	}
	return nil, nil
}

// startBackground starts the store's goroutines: the writer, the witness
// (a writer with a witness directory) and value-log GC (a writer on disk).
func (s *Store) startBackground(opts Options) {
	s.bgWG.Add(1)
	go s.writeLoop()
	if s.witnessDir != "" && !s.readOnly {
		s.witnessKick = make(chan struct{}, 1)
		s.bgWG.Add(1)
		go s.witnessLoop()
	}
	if !opts.InMemory && !opts.ReadOnly {
		s.notePlace()
		if s.place.known {
			s.bgWG.Add(1)
			go s.watchPlace()
		}
	}
	if gc := opts.GCInterval; gc >= 0 && !opts.InMemory && !opts.ReadOnly {
		if gc == 0 {
			gc = defaultGCInterval
		}
		s.bgWG.Add(1)
		s.gcLoops.Add(1)
		go s.gcLoop(gc)
	}
}

func badgerOptions(opts Options, log *slog.Logger) (badger.Options, error) {
	mt := opts.MemTableSize
	if mt == 0 {
		mt = defaultMemTableSize
	}
	if mt < 1<<20 {
		return badger.Options{}, fmt.Errorf("open ledger: MemTableSize %d is below 1 MiB", mt)
	}
	bc := opts.BlockCacheSize
	if bc == 0 {
		bc = defaultBlockCacheSize
	}
	b := badger.DefaultOptions("").
		WithInMemory(opts.InMemory).
		WithSyncWrites(opts.SyncWrites).
		WithLogger(badgerLogger{log}).
		WithMemTableSize(mt).
		WithBlockCacheSize(bc).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithDetectConflicts(false). // one writer: nothing to conflict with
		WithMetricsEnabled(false).
		WithCompression(options.Snappy).
		WithReadOnly(opts.ReadOnly && !opts.InMemory)
	b = withMemoryBudget(b)
	if opts.LowMemory {
		if opts.MemTableSize == 0 {
			b = b.WithMemTableSize(8 << 20)
		}
		if opts.BlockCacheSize == 0 {
			b = b.WithBlockCacheSize(4 << 20)
		}
		b = b.WithNumCompactors(2).WithBaseTableSize(1 << 20).WithCompression(options.None).WithNumLevelZeroTables(3).WithNumLevelZeroTablesStall(8)
	}
	if opts.NoCompactions || opts.ReadOnly {
		b = b.WithNumCompactors(0)
	}
	return b, nil
}

// prepareDir creates dir or checks that it holds a ralph ledger (or
// nothing), so a mistyped --store never scribbles into a foreign directory.
func prepareDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create ledger store %s: %w", dir, err)
		}
		return writeFileAtomic(filepath.Join(dir, markerFile), []byte(markerText), 0o644)
	case err != nil:
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	case !fi.IsDir():
		return &NotStoreError{fmt.Sprintf("ledger store %s is a file, not a directory; pass a directory to --store", dir)}
	}
	marker, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err == nil {
		if string(marker) != markerText {
			return &NotStoreError{fmt.Sprintf("ledger store %s has format %q, which this build does not read", dir, strings.TrimSpace(string(marker)))}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("open ledger store %s: %w", dir, err)
	}
	for _, e := range entries {
		// A crash while creating the store can leave the marker's temporary
		// file behind (it is renamed into place last): that is still a new store.
		if strings.HasPrefix(e.Name(), "."+markerFile+".tmp") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("open ledger store %s: %w", dir, err)
			}
			continue
		}
		return &NotStoreError{fmt.Sprintf("%s is not a ralph ledger store (it holds %q and no %s file); pass an empty or new directory", dir, e.Name(), markerFile)}
	}
	return writeFileAtomic(filepath.Join(dir, markerFile), []byte(markerText), 0o644)
}

// openBadger opens Badger and turns its failures into one sentence: a lock
// held by another process names that process; anything else is reported as
// a corrupted store. Badger panics on some corruptions; that is caught too.
func openBadger(opts badger.Options, dir string) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("ledger store %s is corrupted and cannot be opened (%v); restore it from a backup or export", dir, r)
		}
	}()
	if !opts.InMemory {
		if err := precheck(opts, dir); err != nil {
			// A table a live writer's compaction just removed is not damage.
			if pid := lockPID(filepath.Join(opts.Dir, "LOCK")); pid > 0 && pid != os.Getpid() && processAlive(pid) {
				return nil, &LockedError{Dir: dir, PID: pid}
			}
			return nil, err
		}
	}
	// Badger locks the directory with flock on a descriptor it closes on
	// Close, and a child this process is forking at that moment (shell.exec,
	// a stop command, a test's helper) shares the descriptor until it execs.
	// So a lock this process released can stay held for a moment, with no
	// other process named in the lock file: retry briefly before reporting it.
	for attempt := 0; ; attempt++ {
		db, err = badger.Open(opts)
		if err == nil {
			return db, nil
		}
		if !strings.Contains(err.Error(), "Cannot acquire directory lock") {
			break
		}
		pid := lockPID(filepath.Join(opts.Dir, "LOCK"))
		if (pid != 0 && pid != os.Getpid()) || attempt == lockRetries {
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		time.Sleep(lockRetryDelay)
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return nil, fmt.Errorf("ledger store %s is corrupted or not a ledger and cannot be opened: %s", dir, msg)
}

// How long Open waits out a directory lock that no other process holds.
const (
	lockRetries    = 40
	lockRetryDelay = 25 * time.Millisecond
)

// removeEmptyLogs deletes value-log (.vlog) and memtable-log (.mem) files
// of zero bytes. A process killed between creating such a file and sizing
// it leaves one behind, and Badger then refuses to open the store ("Open
// existing file …: Create a new file", "while opening memtables … Create a
// new file"). The file holds nothing, not even its header, so nothing can
// point into it; Badger creates it again when it needs it.
func removeEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open ledger store: %w", err)
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if (ext != ".vlog" && ext != ".mem") || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("open ledger store: remove the empty log file a crash left: %w", err)
		}
		log.Warn("removed an empty log file left by a crash", "file", filepath.Join(dir, e.Name()))
	}
	return nil
}

// lockPID reads the pid Badger writes into its LOCK file.
func lockPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// initSafe is init with a panic on corrupt data turned into an error.
func (s *Store) initSafe(opts Options) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.corrupt(r)
		}
	}()
	return s.init(opts)
}

// init loads the head, the store's identity and its key, and checks that
// the head is the last stored action.
func (s *Store) init(opts Options) error {
	if err := s.setLimits(opts); err != nil {
		return err
	}
	var err error
	if opts.ReadOnly {
		if err := s.checkImportMark(); err != nil {
			return err
		}
	} else if s.rolledBack, err = s.rollbackImport(); err != nil {
		return err
	}
	head, err := s.loadHead()
	if err != nil {
		// Stay open for reading and Verify, but refuse to extend a chain
		// whose end is unknown.
		s.damaged = fmt.Errorf("ledger store %s is damaged (%w); run ralph chain verify to find where", s.describe(), err)
		s.log.Warn("ledger store is damaged; appends are refused", "store", s.describe(), "err", err)
	}
	s.head.Store(&head)
	meta, err := s.readMeta()
	if err != nil {
		return fmt.Errorf("ledger store %s: %w", s.describe(), err)
	}
	if err := s.loadIdentity(opts, meta); err != nil {
		return err
	}
	if opts.ReadOnly {
		return nil
	}
	if err := s.loadSigningKey(opts); err != nil {
		return err
	}
	if s.damaged != nil {
		return nil
	}
	return s.loadTree(meta, head)
}

// setLimits takes the options a store keeps and sizes its transactions
// and values by Badger's limits.
func (s *Store) setLimits(opts Options) error {
	s.readOnly = opts.ReadOnly
	s.witnessDir = opts.WitnessDir
	s.onWitnessErr = opts.OnWitnessError
	s.rf = newRangeFactory()
	s.txnBytes = s.db.MaxBatchSize() - txnReserveBytes
	s.txnCount = s.db.MaxBatchCount() - txnReserveCount
	s.maxValue = valueLogFileSize
	if opts.InMemory {
		s.maxValue = inMemoryMaxValue
	}
	if s.txnBytes <= 0 || s.txnCount <= 0 {
		return fmt.Errorf("open ledger: MemTableSize is too small to hold a transaction")
	}
	return nil
}

// loadIdentity takes the store's id and verifier key from its metadata, or
// for a store of the first format the public key from its file.
func (s *Store) loadIdentity(opts Options, meta storeMeta) error {
	s.id, s.vkey = meta.id, meta.vkey
	if s.vkey != "" {
		var err error
		if _, s.pub, err = ParseVerifierKey(s.vkey); err != nil {
			return fmt.Errorf("ledger store %s records a malformed key: %w", s.describe(), err)
		}
	} else if !opts.InMemory {
		// A store of the first format: its public key is a file.
		if pub, err := ReadPublicKey(s.dir); err == nil {
			s.pub = pub
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ledger store %s: %w", s.describe(), err)
		}
	}
	return nil
}

// loadTree loads the Merkle tree of the actions up to head: read from the
// store when its metadata recorded the tree at head, else rebuilt.
func (s *Store) loadTree(meta storeMeta, head Head) error {
	var err error
	if meta.treeSize == head.Seq {
		err = s.db.View(func(txn *badger.Txn) error {
			var err error
			r := newTreeReader(context.Background(), txn)
			defer r.close()
			s.tree, err = r.compactRange(s.rf, head.Seq)
			return err
		})
	} else {
		s.tree, err = s.rebuildTree(head.Seq)
	}
	if err != nil {
		return fmt.Errorf("ledger store %s: load the Merkle tree: %w", s.describe(), err)
	}
	return nil
}

// loadSigningKey finds the private key of a store opened for writing and
// records the store's id and public key when it has none yet.
func (s *Store) loadSigningKey(opts Options) error {
	var err error
	if s.id == "" {
		s.id, err = newStoreID()
		if err != nil {
			return err
		}
	}
	priv, err := s.privateKey(opts)
	if err != nil {
		return err
	}
	pub := priv.Public().(ed25519.PublicKey)
	if s.pub != nil && !pub.Equal(s.pub) {
		vk, _ := VerifierKey(Origin(s.id), s.pub)
		return &KeyError{Msg: fmt.Sprintf("ledger store %s is signed by key %s, not by the private key %s; pass the key that signs this store with --key FILE", s.describe(), vk, keyName(s.keyPath))}
	}
	s.priv, s.pub = priv, pub
	if s.signer, err = newNoteSigner(Origin(s.id), priv); err != nil {
		return err
	}
	vkey, err := VerifierKey(Origin(s.id), pub)
	if err != nil {
		return err
	}
	if vkey != s.vkey {
		s.vkey = vkey
		return s.writeMeta()
	}
	return nil
}

// privateKey is the store's private key: the one the options give, a new
// one for a store in memory, else the one in its key file (keyFile).
func (s *Store) privateKey(opts Options) (ed25519.PrivateKey, error) {
	switch {
	case opts.PrivateKey != nil:
		if len(opts.PrivateKey) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("open ledger: PrivateKey is %d bytes, want %d", len(opts.PrivateKey), ed25519.PrivateKeySize)
		}
		return opts.PrivateKey, nil
	case opts.InMemory:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate signing key: %w", err)
		}
		return priv, nil
	}
	return s.keyFile(opts)
}

// keyFile loads the private key of a store on disk, and sets s.keyPath to
// its file: the legacy key inside the store if there is one (with a
// warning), else the file the options name or the store's in the key
// directory, made when the store has no public key yet.
func (s *Store) keyFile(opts Options) (ed25519.PrivateKey, error) {
	priv, err := legacyKey(s.dir, s.log)
	if err != nil {
		return nil, fmt.Errorf("ledger store %s: %w", s.dir, err)
	}
	if priv != nil {
		s.keyPath = LegacyKeyPath(s.dir)
		s.log.Warn("ledger store keeps its private key inside itself; run ralph chain key --move", "store", s.dir)
		return priv, nil
	}
	path := opts.KeyFile
	if path == "" {
		kd := opts.KeyDir
		if kd == "" {
			if kd, err = DefaultKeyDir(); err != nil {
				return nil, err
			}
		}
		path = StoreKeyPath(kd, s.id)
	}
	if s.pub != nil {
		// An existing key must not be replaced by a new one.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			vk, _ := VerifierKey(Origin(s.id), s.pub)
			return nil, &KeyError{Msg: fmt.Sprintf("ledger store %s is signed by key %s, whose private key is not at %s; pass it with --key FILE (or RALPH_KEY)", s.dir, vk, path)}
		}
	}
	if priv, _, err = loadOrCreateKeyFile(path, s.log); err != nil {
		return nil, fmt.Errorf("ledger store %s: %w", s.dir, err)
	}
	s.keyPath = path
	return priv, nil
}

func keyName(path string) string {
	if path == "" {
		return "given to Open"
	}
	return path
}

// KeyError reports a private key that does not sign this store, or a
// store whose private key cannot be found.
type KeyError struct{ Msg string }

func (e *KeyError) Error() string { return e.Msg }

func (s *Store) describe() string {
	if s.dir == "" {
		return "(in memory)"
	}
	return s.dir
}

// loadHead reads h and checks it against the last a/ key.
func (s *Store) loadHead() (Head, error) {
	var head Head
	err := s.db.View(func(txn *badger.Txn) error {
		var last uint64
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(prefixAction)})
		it.Seek(actionKey(^uint64(0)))
		if it.Valid() {
			k := it.Item().Key()
			seq, ok := parseActionKey(k)
			if !ok {
				it.Close()
				return fmt.Errorf("stored action key %q is malformed", k)
			}
			last = seq
		}
		it.Close()
		item, err := txn.Get([]byte(keyHead))
		if errors.Is(err, badger.ErrKeyNotFound) {
			if last != 0 {
				return fmt.Errorf("it holds actions up to seq %d but no head record", last)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := item.Value(func(v []byte) error {
			head, err = decodeHead(v)
			return err
		}); err != nil {
			return err
		}
		if head.Seq != last {
			return fmt.Errorf("its head says seq %d but the last stored action is seq %d", head.Seq, last)
		}
		return nil
	})
	return head, err
}

// ID returns the store id; the store's origin is ralph/<id>. A store of
// the first format opened read-only has none until it is next written.
func (s *Store) ID() string { return s.id }

// VerifierKeyString returns the signed-note verifier key the store
// records ("" for a store of the first format not written since).
func (s *Store) VerifierKeyString() string { return s.vkey }

// KeyPath returns where the private key was read ("" when read-only).
func (s *Store) KeyPath() string { return s.keyPath }

// Dir returns the store directory ("" in memory).
func (s *Store) Dir() string { return s.dir }

// PublicKey returns the key that verifies this store's checkpoints.
func (s *Store) PublicKey() ed25519.PublicKey { return s.pub }

// Head returns the last committed action's seq and chain hash.
func (s *Store) Head() Head { return *s.head.Load() }

// view runs fn in a read-only transaction unless the store is closed.
// Badger panics on some corrupt blocks; such a panic is an error naming
// the store.
func (s *Store) view(fn func(txn *badger.Txn) error) (err error) {
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.corrupt(r)
		}
	}()
	return s.db.View(fn)
}

// DefaultCloseTimeout bounds Close when Options.CloseTimeout is not set,
// and DefaultCommitTimeout an append's wait for its commit (Badger stalls
// writes for seconds at most while it compacts; only a flush that keeps
// failing stalls them for a minute).
const (
	DefaultCloseTimeout  = 10 * time.Second
	DefaultCommitTimeout = time.Minute
)

// StuckError reports a store whose Close, or a commit (Commit), did not
// finish within its bound: Badger is still flushing or stopping, or stalls
// its writes because its flushes fail, and the process should exit,
// leaving what is on disk as it is (the next writer recovers it).
type StuckError struct {
	Dir        string
	Commit     bool // a commit, not Close, passed its bound
	Waited     time.Duration
	Witness    string // the witness file ("" when none is kept)
	WitnessSeq uint64 // the action its checkpoint signs (0: none)
}

func (e *StuckError) Error() string {
	if e.Commit {
		return fmt.Sprintf("ledger store %s took no commit for %s (Badger stalls its writes when it cannot flush; its log says why), so nothing more can be recorded; %s",
			e.Dir, e.Waited.Round(time.Millisecond), e.witness())
	}
	return fmt.Sprintf("ledger store %s did not close within %s, so it is left as it is on disk (the next run or resume on it recovers it); %s",
		e.Dir, e.Waited.Round(time.Millisecond), e.witness())
}

func (e *StuckError) witness() string {
	switch {
	case e.Witness != "" && e.WitnessSeq > 0:
		return fmt.Sprintf("its last witnessed action is seq %d (%s)", e.WitnessSeq, e.Witness)
	case e.Witness != "":
		return fmt.Sprintf("its witness %s holds no checkpoint of it yet", e.Witness)
	}
	return "no witness of it is kept"
}

// Close waits for pending appends to commit, stops the subscribers and
// background work, and closes Badger, all within the store's close bound
// (Options.CloseTimeout): past it, Close returns a StuckError and leaves
// the rest to the process's exit. A store found lost (place.go) is not
// flushed: Close returns its LostError. Calling Close again returns the
// first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		done := make(chan error, 1)
		go func() { done <- s.close() }()
		t := time.NewTimer(s.closeLimit)
		defer t.Stop()
		select {
		case s.closeErr = <-done:
		case <-t.C:
			e := s.stuck(false, s.closeLimit)
			s.log.Error("ledger store did not close in time", "store", s.describe(), "waited", s.closeLimit)
			if s.onStuck != nil {
				s.onStuck(e)
			}
			s.closeErr = e
		}
		s.closeDone.Store(true)
	})
	return s.closeErr
}

// stuck is the StuckError of a close or a commit that waited past its
// bound.
func (s *Store) stuck(commit bool, waited time.Duration) *StuckError {
	e := &StuckError{Dir: s.describe(), Commit: commit, Waited: waited}
	e.Witness, e.WitnessSeq = s.Witnessed()
	return e
}

// Closed reports whether Close has returned (the store's files may still
// be in Badger's hands when it returned a StuckError).
func (s *Store) Closed() bool { return s.closeDone.Load() }

// Writable reports whether the store was opened for writing.
func (s *Store) Writable() bool { return !s.readOnly }

// close is Close's work: stop the writer, advance the witness, stop the
// background goroutines, then close Badger unless its flush cannot be
// written (a full disk, a lost store).
func (s *Store) close() error {
	s.sendMu.Lock()
	s.sendClosed = true
	close(s.reqCh)
	s.sendMu.Unlock()
	<-s.writerDone
	if s.dir != "" && !s.readOnly {
		_, ro, _ := statFS(filepath.Join(s.dir, dataDir))
		s.checkPlace(true, ro)
	}
	lost := s.lost.Load()
	// A witness that cannot be updated is kept as it is; the next
	// verify reports why (truncation, rollback, rewrite).
	if s.wrote.Load() && lost == nil {
		s.advanceWitness(nil)
	}
	close(s.done)
	s.subWG.Wait()
	s.bgWG.Wait()
	s.witnessMu.Lock()
	s.witnessW.close()
	s.witnessMu.Unlock()
	s.readMu.Lock()
	s.closed = true
	s.readMu.Unlock()
	var err error
	switch {
	case lost != nil:
		// Badger would retry its flush into a directory that is gone, or
		// a file system that takes no writes, forever: leave it.
		err = lost
	case !s.canFlush():
		// Badger would flush the memtable into a table it cannot
		// write, and die of SIGBUS: leave it in its log, which the
		// next writer flushes, and release the lock file.
		s.log.Error("the disk is too full to flush the ledger store; its memtable stays in its log", "store", s.describe())
		if rerr := os.Remove(s.lockFile()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("close ledger store %s: %w", s.describe(), rerr)
		}
	default:
		if cerr := s.db.Close(); cerr != nil {
			err = fmt.Errorf("close ledger store %s: %w", s.describe(), cerr)
		}
	}
	if serr := s.scratch.close(); serr != nil {
		s.log.Warn("remove the ledger's read-only view", "store", s.describe(), "err", serr)
	}
	return err
}

// gcLoop runs value-log GC every interval until Close.
func (s *Store) gcLoop(every time.Duration) {
	defer s.bgWG.Done()
	defer s.gcLoops.Add(-1)
	defer s.recoverBackground("value-log GC")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.gcPasses.Add(1)
		for i := 0; i < 16; i++ { // each pass rewrites at most one file
			err := s.db.RunValueLogGC(0.5)
			if err != nil {
				if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
					s.log.Warn("ledger value-log GC failed", "err", err)
				}
				break
			}
		}
	}
}

// recoverBackground reports a panic in a background goroutine instead of
// letting it vanish or crash a caller that cannot see it.
func (s *Store) recoverBackground(what string) {
	if r := recover(); r != nil {
		s.log.Error("ledger background goroutine panicked", "goroutine", what, "panic", r)
	}
}

// badgerLogger routes Badger's messages to slog. Badger's Info messages are
// start-up and compaction chatter, so they go to Debug.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) { l.emit(slog.LevelError, f, a) }
func (l badgerLogger) Warningf(f string, a ...any) {
	l.emit(slog.LevelWarn, f, a)
}
func (l badgerLogger) Infof(f string, a ...any)  { l.emit(slog.LevelDebug, f, a) }
func (l badgerLogger) Debugf(f string, a ...any) { l.emit(slog.LevelDebug, f, a) }

func (l badgerLogger) emit(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	// Some Badger messages span lines (level summaries); keep one per record.
	msg := strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf(f, a...)), "\n", " | ")
	l.log.Log(ctx, level, msg, "component", "badger")
}

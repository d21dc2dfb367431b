package rtfs

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Conformance cases for the forms and builtins models write most often
// (Clojure's, as in CCOS's plans and prompt grammar). Each case is a
// program and the canonical printed form of its value.

var confQualifiedKeys = []confCase{
	{"keys qualified binds the name", `(let [{:keys [user/name]} {:user/name "x"}] name)`, `"x"`},
	{"keys qualified trip", `(let [{:keys [trip/destination]} {:trip/destination "Paris"}] destination)`, `"Paris"`},
	{"keys qualified or", `(let [{:keys [trip/days] :or {days 3}} {}] days)`, `3`},
	{"keys qualified missing is nil", `(let [{:keys [user/name]} {:name "plain"}] name)`, `nil`},
	{"keys qualified does not leak builtin", `(let [{:keys [user/name]} {}] (nil? name))`, `true`},
	{"keys mixed plain and qualified", `(let [{:keys [id user/email]} {:id 7 :user/email "a@b"}] [id email])`, `[7 "a@b"]`},
	{"ns keys group", `(let [{:user/keys [name age]} {:user/name "n" :user/age 30}] [name age])`, `["n" 30]`},
	{"ns keys group own ns wins", `(let [{:user/keys [name trip/id]} {:user/name "n" :trip/id 2}] [name id])`, `["n" 2]`},
	{"keys as keywords", `(let [{:keys [:a :n/b]} {:a 1 :n/b 2}] [a b])`, `[1 2]`},
	{"strs", `(let [{:strs [host port]} {"host" "h" "port" 80}] [host port])`, `["h" 80]`},
	{"strs or", `(let [{:strs [port] :or {port 8080}} {}] port)`, `8080`},
	{"syms", `(let [{:syms [a b]} {'a 1 'b 2}] (+ a b))`, `3`},
	{"ns syms group", `(let [{:x/syms [a]} {'x/a 5}] a)`, `5`},
	{"keys qualified in fn params", `((fn [{:keys [plan/steps]}] (count steps)) {:plan/steps [1 2 3]})`, `3`},
	{"keys qualified with as", `(let [{:keys [user/id] :as u} {:user/id 1 :x 2}] [id (:x u)])`, `[1 2]`},
	{"or default evaluated only when missing", `(let [{:keys [a] :or {a (throw "no")}} {:a 1}] a)`, `1`},
}

var confLoops = []confCase{
	{"loop sum", `(loop [i 0 acc 0] (if (< i 10) (recur (inc i) (+ acc i)) acc))`, `45`},
	{"loop builds vector", `(loop [i 0 v []] (if (= i 4) v (recur (inc i) (conj v (* i i)))))`, `[0 1 4 9]`},
	{"loop destructuring", `(loop [[x & xs] [1 2 3] out []] (if x (recur xs (conj out (* 2 x))) out))`, `[2 4 6]`},
	{"loop map destructuring", `(loop [{:keys [n acc]} {:n 3 :acc 1}] (if (zero? n) acc (recur {:n (dec n) :acc (* acc n)})))`, `6`},
	{"loop no recur", `(loop [x 5] (* x 2))`, `10`},
	{"loop empty bindings", `(loop [] 7)`, `7`},
	{"loop inits see earlier", `(loop [a 2 b (* a 10)] [a b])`, `[2 20]`},
	{"loop recur in cond", `(loop [n 10 steps 0] (cond (= n 1) steps (even? n) (recur (/ n 2) (inc steps)) :else (recur (inc (* 3 n)) (inc steps))))`, `6`},
	{"loop recur in when", `(loop [i 0] (when (< i 3) (recur (inc i))))`, `nil`},
	{"loop recur in let", `(loop [i 0 acc []] (let [j (inc i)] (if (> j 3) acc (recur j (conj acc j)))))`, `[1 2 3]`},
	{"loop recur in do", `(loop [i 0] (do (+ 1 1) (if (< i 5) (recur (inc i)) i)))`, `5`},
	{"loop recur in and", `(loop [i 0] (and (< i 100) (if (= i 3) :three (recur (inc i)))))`, `:three`},
	{"loop recur in or", `(loop [i 0] (or (when (= i 2) :two) (recur (inc i))))`, `:two`},
	{"loop recur in case", `(loop [s :a n 0] (case s :a (recur :b (inc n)) :b (recur :c (inc n)) :c n))`, `2`},
	{"loop recur in if-let", `(loop [xs [1 2 3] acc 0] (if-let [x (first xs)] (recur (rest xs) (+ acc x)) acc))`, `6`},
	{"loop recur in when-let", `(loop [xs [1 2] n 0] (when-let [x (first xs)] (if (= x 2) n (recur (rest xs) (inc n)))))`, `1`},
	{"loop recur in condp", `(loop [i 0] (condp = i 3 :done (recur (inc i))))`, `:done`},
	{"loop recur through ->", `(loop [i 0] (if (< i 3) (-> i inc recur) i))`, `3`},
	{"loop nested loops", `(loop [i 0 acc []] (if (< i 3) (recur (inc i) (conj acc (loop [j 0 s 0] (if (<= j i) (recur (inc j) (+ s j)) s)))) acc))`, `[0 1 3]`},
	{"loop closures keep their pass", `(let [fs (loop [i 0 acc []] (if (< i 3) (recur (inc i) (conj acc (fn [] i))) acc))] (map (fn [f] (f)) fs))`, `[0 1 2]`},
	{"loop shadows outer", `(let [i 100] [(loop [i 0] (if (< i 2) (recur (inc i)) i)) i])`, `[2 100]`},
	{"loop inside fn", `(defn sum-to [n] (loop [i 1 s 0] (if (> i n) s (recur (inc i) (+ s i))))) (sum-to 100)`, `5050`},
	{"loop three bindings", `(loop [a 0 b 1 n 10] (if (zero? n) a (recur b (+ a b) (dec n))))`, `55`},
	{"loop one binding", `(loop [n 5] (if (pos? n) (recur (dec n)) :done))`, `:done`},
	{"loop float accumulator", `(loop [i 0 x 1.0] (if (< i 3) (recur (inc i) (/ x 2)) x))`, `0.125`},
	{"loop long run", `(loop [i 0] (if (< i 100000) (recur (inc i)) i))`, `100000`},
	{"fn recur", `((fn [n acc] (if (zero? n) acc (recur (dec n) (* acc n)))) 5 1)`, `120`},
	{"defn recur", `(defn count-down [n] (if (pos? n) (recur (dec n)) :liftoff)) (count-down 100000)`, `:liftoff`},
	{"fn recur variadic passes seq", `((fn [n & xs] (if (pos? n) (recur (dec n) (conj (vec xs) n)) xs)) 3)`, `[3 2 1]`},
	{"fn recur destructured param", `((fn [[a b]] (if (< a 10) (recur [(+ a b) b]) a)) [1 4])`, `13`},
	{"fn recur closures keep their pass", `(let [f (fn [i acc] (if (< i 2) (recur (inc i) (conj acc (fn [] i))) acc))] (map (fn [g] (g)) (f 0 [])))`, `[0 1]`},
	{"recur to inner fn not loop", `(loop [i 0] (if (< i 2) (recur ((fn [x] (if (< x 10) (recur (inc x)) x)) i)) i))`, `10`},
}

var confIteration = []confCase{
	{"dotimes returns nil", `(dotimes [i 3] i)`, `nil`},
	{"dotimes zero", `(dotimes [i 0] (throw "never"))`, `nil`},
	{"dotimes negative", `(dotimes [i -2] (throw "never"))`, `nil`},
	{"dotimes runs body", `(let [r (try (dotimes [i 5] (when (= i 3) (throw {:type :app/at :message (str i)}))) (catch e (:message e)))] r)`, `"3"`},
	{"doseq returns nil", `(doseq [x [1 2 3]] (* x 2))`, `nil`},
	{"doseq throws from body", `(try (doseq [x [1 2 3]] (when (= x 2) (throw (str "at " x)))) (catch e (:message e)))`, `"at 2"`},
	{"doseq over map", `(try (doseq [[k v] {:b 2 :a 1}] (throw (str k v))) (catch e (:message e)))`, `":a1"`},
	{"doseq when", `(try (doseq [x (range 10) :when (> x 6)] (throw (str x))) (catch e (:message e)))`, `"7"`},
	{"doseq nested", `(try (doseq [x [1 2] y [:a :b] :when (= [x y] [2 :a])] (throw (pr-str [x y]))) (catch e (:message e)))`, `"[2 :a]"`},
	{"doseq empty", `(doseq [x []] (throw "never"))`, `nil`},
	{"doseq nil", `(doseq [x nil] (throw "never"))`, `nil`},
	{"for simple", `(for [x [1 2 3]] (* x x))`, `[1 4 9]`},
	{"for range", `(for [i (range 4)] i)`, `[0 1 2 3]`},
	{"for when", `(for [x (range 10) :when (even? x)] x)`, `[0 2 4 6 8]`},
	{"for let", `(for [x [1 2] :let [y (* x 10)]] y)`, `[10 20]`},
	{"for when and let", `(for [x [1 2 3 4] :let [sq (* x x)] :when (odd? sq)] [x sq])`, `[[1 1] [3 9]]`},
	{"for while", `(for [x [1 2 3 4 1] :while (< x 3)] x)`, `[1 2]`},
	{"for two bindings", `(for [x [1 2] y [:a :b]] [x y])`, `[[1 :a] [1 :b] [2 :a] [2 :b]]`},
	{"for dependent binding", `(for [x [1 2 3] y (range x)] [x y])`, `[[1 0] [2 0] [2 1] [3 0] [3 1] [3 2]]`},
	{"for while on inner", `(for [x [1 2 3] y [1 2 3] :while (<= y x)] [x y])`, `[[1 1] [2 1] [2 2] [3 1] [3 2] [3 3]]`},
	{"for when on outer", `(for [x [1 2 3] :when (odd? x) y [:a]] [x y])`, `[[1 :a] [3 :a]]`},
	{"for destructuring", `(for [[k v] {:a 1 :b 2}] (str (name k) v))`, `["a1" "b2"]`},
	{"for map destructuring", `(for [{:keys [id]} [{:id 1} {:id 2}]] id)`, `[1 2]`},
	{"for over set", `(for [x #{3 1 2}] x)`, `[1 2 3]`},
	{"for over string", `(for [c "ab"] c)`, `["a" "b"]`},
	{"for empty", `(for [x []] x)`, `[]`},
	{"for closures keep their pass", `(map (fn [f] (f)) (for [x [1 2 3]] (fn [] x)))`, `[1 2 3]`},
	{"for is eager vector", `(vector? (for [x [1]] x))`, `true`},
	{"for let several", `(for [x [1 2] :let [a (inc x) b (* a 2)]] b)`, `[4 6]`},
	{"for nested for", `(for [x [1 2]] (for [y [1 2]] (* x y)))`, `[[1 2] [2 4]]`},
	{"for three levels", `(count (for [a (range 3) b (range 3) c (range 3)] [a b c]))`, `27`},
	{"for with index", `(for [[i x] (map-indexed vector [:a :b])] [i x])`, `[[0 :a] [1 :b]]`},
}

var confBinding = []confCase{
	{"if-let then", `(if-let [x (:a {:a 1})] (inc x) :none)`, `2`},
	{"if-let else", `(if-let [x (:a {})] (inc x) :none)`, `:none`},
	{"if-let false is else", `(if-let [x false] :then :else)`, `:else`},
	{"if-let no else", `(if-let [x nil] :then)`, `nil`},
	{"if-let destructure", `(if-let [[a b] [1 2]] (+ a b) 0)`, `3`},
	{"if-let map destructure", `(if-let [{:keys [n]} {:n 5}] n 0)`, `5`},
	{"if-let name not in else", `(let [x :outer] (if-let [x nil] x x))`, `:outer`},
	{"when-let body", `(when-let [x 5] (+ x 1) (* x 2))`, `10`},
	{"when-let nil", `(when-let [x nil] (throw "never"))`, `nil`},
	{"when-let zero is true", `(when-let [x 0] [x])`, `[0]`},
	{"if-some false is some", `(if-some [x false] [:some x] :none)`, `[:some false]`},
	{"if-some nil", `(if-some [x nil] :some :none)`, `:none`},
	{"when-some false", `(when-some [x false] (str x))`, `"false"`},
	{"when-some nil", `(when-some [x nil] :never)`, `nil`},
	{"letfn single", `(letfn [(twice [x] (* 2 x))] (twice 21))`, `42`},
	{"letfn mutual", `(letfn [(ev? [n] (if (zero? n) true (od? (dec n)))) (od? [n] (if (zero? n) false (ev? (dec n))))] [(ev? 10) (od? 7) (ev? 3)])`, `[true true false]`},
	{"letfn closes over", `(let [k 3] (letfn [(f [x] (* k x))] (f 2)))`, `6`},
	{"letfn recur", `(letfn [(cnt [n acc] (if (zero? n) acc (recur (dec n) (inc acc))))] (cnt 1000 0))`, `1000`},
	{"declare forward", "(declare odd2?)\n(defn even2? [n] (if (zero? n) true (odd2? (dec n))))\n(defn odd2? [n] (if (zero? n) false (even2? (dec n))))\n[(even2? 10) (odd2? 3)]", `[true true]`},
	{"declare returns nil", `(declare a b)`, `nil`},
	{"declare then def", "(declare x)\n(defn getx [] x)\n(def x 42)\n(getx)", `42`},
	{"declared unset is nil", "(declare later)\nlater", `nil`},
	{"as-> threads", `(as-> 5 $ (+ $ 1) (* $ 2) [$ $])`, `[12 12]`},
	{"as-> position free", `(as-> {:a 1} m (assoc m :b 2) (get m :b) (- 10 m))`, `8`},
	{"as-> only init", `(as-> 3 x)`, `3`},
	{"some-> through", `(some-> {:a {:b 1}} :a :b inc)`, `2`},
	{"some-> stops at nil", `(some-> {:a nil} :a :b inc)`, `nil`},
	{"some-> with args", `(some-> 5 (- 2) (* 10))`, `30`},
	{"some-> false continues", `(some-> false not)`, `true`},
	{"some->> through", `(some->> [1 2 3] (map inc) (filter even?))`, `[2 4]`},
	{"some->> stops", `(some->> {:xs nil} :xs (map inc))`, `nil`},
	{"some-> init nil", `(some-> nil :a (str "never"))`, `nil`},
}

var confCaseForms = []confCase{
	{"case keyword", `(case :b :a 1 :b 2 3)`, `2`},
	{"case default", `(case :z :a 1 :b 2 :dflt)`, `:dflt`},
	{"case int", `(case (+ 1 1) 1 :one 2 :two)`, `:two`},
	{"case string", `(case "go" "go" :golang "rs" :rust :other)`, `:golang`},
	{"case list of alternatives", `(case 3 (1 2) :low (3 4) :high :none)`, `:high`},
	{"case symbol literal", `(case 'foo foo :sym :other)`, `:sym`},
	{"case nil", `(case nil nil :nothing :something)`, `:nothing`},
	{"case vector", `(case [1 2] [1 2] :pair :other)`, `:pair`},
	{"case list equals vector test", `(case '(1 2) [1 2] :pair :other)`, `:pair`},
	{"case map", `(case {:a 1} {:a 1} :m :other)`, `:m`},
	{"case boolean", `(case false true :t false :f)`, `:f`},
	{"case only default", `(case 5 :always)`, `:always`},
	{"case int not float", `(case 1.0 1 :int :other)`, `:other`},
	{"case tests not evaluated", `(let [x 1] (case 'x x :symbol-x :other))`, `:symbol-x`},
	{"case many", `(case :e :a 1 :b 2 :c 3 :d 4 :e 5 :f 6 :g 7 :h 8 :i 9 :j 10 0)`, `5`},
	{"condp equals", `(condp = 3 1 :a 2 :b 3 :c :none)`, `:c`},
	{"condp default", `(condp = 9 1 :a :none)`, `:none`},
	{"condp less", `(condp < 5 10 :ten 3 :three :none)`, `:three`},
	{"condp contains", `(condp contains? :x #{:a} :in-a #{:x :y} :in-xy :none)`, `:in-xy`},
	{"condp :>>", `(condp some [1 2 3] #{4 5} :>> inc #{2 9} :>> dec :none)`, `1`},
	{"condp re-find", `(condp re-find "FAIL x" #"^ok" :ok #"^FAIL (\w+)" :>> second :unknown)`, `"x"`},
	{"match literal", `(match 2 1 :one 2 :two :else :many)`, `:two`},
	{"match else", `(match 7 1 :one :else :many)`, `:many`},
	{"match wildcard", `(match [1 2] [_ 2] :ends-2 :else :no)`, `:ends-2`},
	{"match binds", `(match [1 2] [1 x] [:one x] :else :no)`, `[:one 2]`},
	{"match vector length", `(match [1 2 3] [a b] :two [a b c] [:three c] :else :no)`, `[:three 3]`},
	{"match rest", `(match [1 2 3] [h & t] [h t])`, `[1 [2 3]]`},
	{"match map", `(match {:type :user :name "a"} {:type :admin} :admin {:type :user :name n} [:user n] :else :x)`, `[:user "a"]`},
	{"match map missing key", `(match {:a 1} {:b _} :has-b :else :no-b)`, `:no-b`},
	{"match guard", `(match 4 (x :guard odd?) :odd (x :guard even?) [:even x])`, `[:even 4]`},
	{"match alternatives", `(match 5 (1 | 3 | 5) :small-odd :else :other)`, `:small-odd`},
	{"match keyword", `(match :stop :go 1 :stop 2)`, `2`},
	{"match string", `(match "x" "y" 1 "x" 2)`, `2`},
	{"match nil", `(match nil nil :nil :else :x)`, `:nil`},
	{"match nested", `(match {:r [:ok 3]} {:r [:ok n]} n {:r [:err e]} e)`, `3`},
	{"match quoted symbol", `(match 'a 'a :sym-a :else :x)`, `:sym-a`},
	{"match recur in clause", `(loop [xs [1 2 3] n 0] (match xs [] n [_ & r] (recur r (inc n))))`, `3`},
	{"match not a seq", `(match 5 [x] :vec :else :scalar)`, `:scalar`},
}

var confFnLiterals = []confCase{
	{"fn literal %", `(#(* % %) 7)`, `49`},
	{"fn literal %1 %2", `(#(- %1 %2) 10 3)`, `7`},
	{"fn literal % is %1", `(#(+ % %1) 4)`, `8`},
	{"fn literal %&", `(#(count %&) 1 2 3)`, `3`},
	{"fn literal %& nil when none", `(#(vector % %&) 1)`, `[1 nil]`},
	{"fn literal no args", `(#(+ 1 2))`, `3`},
	{"fn literal in map", `(map #(str %1 "-" %2) [1 2] [:a :b])`, `["1-:a" "2-:b"]`},
	{"fn literal in filter", `(filter #(> % 2) [1 2 3 4])`, `[3 4]`},
	{"fn literal arity from highest", `(#(identity %3) 1 2 3)`, `3`},
	{"fn literal arity error", `(try (#(+ %1 %2) 1) (catch e (:type e)))`, `:rtfs/arity-error`},
	{"fn literal vector body", `(#(vector %2 %1) :a :b)`, `[:b :a]`},
	{"fn literal keyword lookup", `(map #(:id %) [{:id 1} {:id 2}])`, `[1 2]`},
	{"fn literal with fn inside", `(#(map (fn [x] (* x %)) [1 2]) 10)`, `[10 20]`},
	{"fn literal closes over let", `(let [k 5] (map #(+ k %) [1 2]))`, `[6 7]`},
	{"fn literal in sort-by", `(sort-by #(- %) [1 3 2])`, `[3 2 1]`},
	{"fn literal in reduce", `(reduce #(+ %1 (* 2 %2)) 0 [1 2 3])`, `12`},
	{"percent outside is a symbol", `(let [% 3] %)`, `3`},
}

var confSets = []confCase{
	{"set literal", `#{3 1 2}`, `#{1 2 3}`},
	{"set empty", `#{}`, `#{}`},
	{"set canonical order mixed", `#{"b" :a 1 [2]}`, `#{"b" 1 :a [2]}`},
	{"set of sets", `#{#{2 1} #{3}}`, `#{#{1 2} #{3}}`},
	{"set of sets equal", `(= #{#{1 2}} #{#{2 1}})`, `true`},
	{"set equality order free", `(= #{1 2 3} #{3 2 1})`, `true`},
	{"set not equal vector", `(= #{1 2} [1 2])`, `false`},
	{"set not equal map", `(= #{} {})`, `false`},
	{"set int float distinct", `(count #{1 1.0})`, `2`},
	{"set as function hit", `(#{:a :b} :a)`, `:a`},
	{"set as function miss", `(#{:a :b} :c)`, `nil`},
	{"set as function default", `(#{:a} :z :none)`, `:none`},
	{"keyword on set", `(:a #{:a :b})`, `:a`},
	{"set in filter", `(filter #{:x :y} [:a :x :b :y])`, `[:x :y]`},
	{"set in some", `(some #{3} [1 2 3])`, `3`},
	{"set in remove returns the member", `(remove #{nil false} [1 nil 2 false])`, `[1 nil 2 false]`},
	{"contains? set", `[(contains? #{1 2} 2) (contains? #{1 2} 5)]`, `[true false]`},
	{"contains? set nil member", `(contains? #{nil} nil)`, `true`},
	{"get set", `[(get #{:a} :a) (get #{:a} :b) (get #{:a} :b :d)]`, `[:a nil :d]`},
	{"conj set", `(conj #{1} 2 1)`, `#{1 2}`},
	{"conj set no change", `(conj #{1 2} 1)`, `#{1 2}`},
	{"disj", `(disj #{1 2 3} 2)`, `#{1 3}`},
	{"disj many", `(disj #{1 2 3} 1 3 9)`, `#{2}`},
	{"disj none", `(disj #{1})`, `#{1}`},
	{"disj nil", `(disj nil 1)`, `nil`},
	{"set fn", `(set [3 1 3 2])`, `#{1 2 3}`},
	{"set of map entries", `(set {:a 1})`, `#{[:a 1]}`},
	{"set of string", `(set "aba")`, `#{"a" "b"}`},
	{"set of nil", `(set nil)`, `#{}`},
	{"hash-set", `(hash-set 2 1 2)`, `#{1 2}`},
	{"into set", `(into #{} [1 2 2 3])`, `#{1 2 3}`},
	{"into vector from set", `(into [] #{2 1})`, `[1 2]`},
	{"count set", `(count #{1 2 3})`, `3`},
	{"empty? set", `[(empty? #{}) (empty? #{1})]`, `[true false]`},
	{"not-empty set", `[(not-empty #{}) (not-empty #{1})]`, `[nil #{1}]`},
	{"seq of set", `(seq #{:b :a})`, `[:a :b]`},
	{"first of set", `(first #{3 1 2})`, `1`},
	{"map over set", `(map inc #{1 2})`, `[2 3]`},
	{"sort set", `(sort #{3 1 2})`, `[1 2 3]`},
	{"set?", `[(set? #{}) (set? []) (coll? #{})]`, `[true false true]`},
	{"set literal evaluates", `(let [x 1 y 2] #{x y})`, `#{1 2}`},
	{"set as map key", `(get {#{1 2} :found} #{2 1})`, `:found`},
	{"set in set", `(contains? #{#{1}} #{1})`, `true`},
	{"set str", `(str #{1 "a"})`, `"#{\"a\" 1}"`},
	{"set pr-str", `(pr-str #{:x})`, `"#{:x}"`},
	{"set distinct", `(distinct [#{1 2} #{2 1}])`, `[#{1 2}]`},
	{"set frequencies", `(frequencies [#{1} #{1} #{2}])`, `{#{1} 2 #{2} 1}`},
	{"set difference by remove", `(set (remove #{2} #{1 2 3}))`, `#{1 3}`},
	{"set union by into", `(into #{1 2} #{2 3})`, `#{1 2 3}`},
	{"set intersection by filter", `(set (filter #{2 3} #{1 2 3}))`, `#{2 3}`},
	{"set quoted", `'#{a b}`, `#{a b}`},
	{"set reduce", `(reduce + #{1 2 3})`, `6`},
	{"set every?", `(every? #{1 2} [1 2 1])`, `true`},
	{"set in vector literal", `[#{1} #{}]`, `[#{1} #{}]`},
	{"set nested in map", `{:tags #{:b :a}}`, `{:tags #{:a :b}}`},
}

var confModelBuiltins = []confCase{
	{"int of float", `(int 3.9)`, `3`},
	{"int of negative float", `(int -3.9)`, `-3`},
	{"int of int", `(int 7)`, `7`},
	{"int of division", `(int (/ 7 2))`, `3`},
	{"float of int", `(float 3)`, `3.0`},
	{"float of float", `(float 2.5)`, `2.5`},
	{"double", `(double 1)`, `1.0`},
	{"map-indexed", `(map-indexed vector [:a :b :c])`, `[[0 :a] [1 :b] [2 :c]]`},
	{"map-indexed fn", `(map-indexed (fn [i x] (* i x)) [5 5 5])`, `[0 5 10]`},
	{"map-indexed empty", `(map-indexed vector [])`, `[]`},
	{"map-indexed map", `(map-indexed (fn [i [k v]] [i k]) {:b 1 :a 2})`, `[[0 :a] [1 :b]]`},
	{"subvec", `(subvec [1 2 3 4] 1 3)`, `[2 3]`},
	{"subvec to end", `(subvec [1 2 3 4] 2)`, `[3 4]`},
	{"subvec empty", `(subvec [1 2] 1 1)`, `[]`},
	{"subvec whole", `(subvec [1 2] 0 2)`, `[1 2]`},
	{"partition", `(partition 2 [1 2 3 4 5])`, `[[1 2] [3 4]]`},
	{"partition step", `(partition 2 1 [1 2 3])`, `[[1 2] [2 3]]`},
	{"partition pad", `(partition 3 3 [:p] [1 2 3 4])`, `[[1 2 3] [4 :p]]`},
	{"partition empty pad keeps rest", `(partition 3 3 [] [1 2 3 4 5])`, `[[1 2 3] [4 5]]`},
	{"partition pad exact", `(partition 2 2 [:p] [1 2])`, `[[1 2]]`},
	{"partition pad step", `(partition 2 3 [:p] (range 7))`, `[[0 1] [3 4] [6 :p]]`},
	{"partition-by", `(partition-by odd? [1 3 2 4 5])`, `[[1 3] [2 4] [5]]`},
	{"partition-by identity", `(partition-by identity [:a :a :b :a])`, `[[:a :a] [:b] [:a]]`},
	{"partition-by empty", `(partition-by odd? [])`, `[]`},
	{"group-by", `(group-by :type [{:type :a :n 1} {:type :b :n 2} {:type :a :n 3}])`, `{:a [{:n 1 :type :a} {:n 3 :type :a}] :b [{:n 2 :type :b}]}`},
	{"group-by count", `(group-by count ["a" "bb" "c"])`, `{1 ["a" "c"] 2 ["bb"]}`},
	{"frequencies", `(frequencies [:a :b :a :c :a])`, `{:a 3 :b 1 :c 1}`},
	{"frequencies string", `(frequencies "abca")`, `{"a" 2 "b" 1 "c" 1}`},
	{"keep", `(keep :id [{:id 1} {} {:id 3}])`, `[1 3]`},
	{"keep keeps false", `(keep (fn [x] (when (odd? x) (> x 2))) [1 2 3])`, `[false true]`},
	{"mapcat", `(mapcat reverse [[1 2] [3 4]])`, `[2 1 4 3]`},
	{"mapcat two colls", `(mapcat (fn [a b] [a b]) [1 2] [:x :y])`, `[1 :x 2 :y]`},
	{"mapcat empty parts", `(mapcat (fn [x] (if (odd? x) [x x] [])) [1 2 3])`, `[1 1 3 3]`},
	{"mapcat over map", `(mapcat (fn [[k v]] [k v]) {:a 1})`, `[:a 1]`},
	{"interpose", `(interpose ", " ["a" "b" "c"])`, `["a" ", " "b" ", " "c"]`},
	{"interpose join", `(apply str (interpose "-" [1 2 3]))`, `"1-2-3"`},
	{"zipmap", `(zipmap [:a :b] [1 2])`, `{:a 1 :b 2}`},
	{"zipmap shorter", `(zipmap [:a :b :c] [1])`, `{:a 1}`},
	{"update", `(update {:n 1} :n inc)`, `{:n 2}`},
	{"update missing", `(update {} :n (fn [x] (if x (inc x) 0)))`, `{:n 0}`},
	{"update extra args", `(update {:n 1} :n + 10 100)`, `{:n 111}`},
	{"update vector", `(update [1 2 3] 1 * 10)`, `[1 20 3]`},
	{"update-in", `(update-in {:a {:b 1}} [:a :b] inc)`, `{:a {:b 2}}`},
	{"update-in creates", `(update-in {} [:a :b] (fn [_] :new))`, `{:a {:b :new}}`},
	{"update-in extra args", `(update-in {:a {:n [1]}} [:a :n] conj 2)`, `{:a {:n [1 2]}}`},
	{"select-keys", `(select-keys {:a 1 :b 2 :c 3} [:a :c])`, `{:a 1 :c 3}`},
	{"select-keys missing", `(select-keys {:a 1} [:z])`, `{}`},
	{"not-empty", `[(not-empty []) (not-empty [1]) (not-empty "") (not-empty {:a 1})]`, `[nil [1] nil {:a 1}]`},
	{"println returns nil", `(println "hello" 1)`, `nil`},
	{"prn returns nil", `(prn {:a 1})`, `nil`},
	{"log returns nil", `(log "step done")`, `nil`},
	{"println as value", `(map println [1 2])`, `[nil nil]`},
}

func TestConformanceModelForms(t *testing.T) {
	t.Parallel()
	groups := [][]confCase{confQualifiedKeys, confLoops, confIteration, confBinding, confCaseForms, confFnLiterals, confSets, confModelBuiltins}
	seen := map[string]bool{}
	total := 0
	for _, group := range groups {
		total += len(group)
		for _, tc := range group {
			if seen[tc.name] {
				t.Fatalf("duplicate case name %q", tc.name)
			}
			seen[tc.name] = true
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				v, err := confEval(tc.src, Options{})
				if err != nil {
					t.Fatalf("%s\nerror: %v", tc.src, err)
				}
				if got := Print(v); got != tc.want {
					t.Errorf("%s\n got %s\nwant %s", tc.src, got, tc.want)
				}
			})
		}
	}
	if total < 250 {
		t.Errorf("%d cases for the model forms; keep at least 250", total)
	}
}

var confModelCompileErrors = []confErrCase{
	{"recur not in tail", "(loop [i 0]\n  (inc (recur (inc i))))", ErrCompile, "2:8", "recur must be in tail position"},
	{"recur in test of if", "(loop [i 0]\n  (if (recur 1) 1 2))", ErrCompile, "2:7", "recur must be in tail position"},
	{"recur not last in do", "(loop [i 0]\n  (do (recur 1) 2))", ErrCompile, "2:7", "recur must be in tail position"},
	{"recur arity too many", "(loop [i 0]\n  (recur 1 2))", ErrCompile, "2:3", "recur needs 1 argument to rebind loop, got 2"},
	{"recur arity too few", "(loop [a 0 b 1]\n  (recur 1))", ErrCompile, "2:3", "recur needs 2 arguments to rebind loop, got 1"},
	{"recur fn arity", "(defn f [x]\n  (recur))", ErrCompile, "2:3", "recur needs 1 argument to rebind fn f, got 0"},
	{"recur outside", "(do\n  (recur 1))", ErrCompile, "2:3", "recur outside loop or fn"},
	{"recur across try", "(loop [i 0]\n  (try (recur 1) (catch e 0)))", ErrCompile, "2:8", "recur must be in tail position"},
	{"recur in dotimes", "(loop [i 0]\n  (dotimes [j 2] (recur 1)))", ErrCompile, "2:18", "recur outside loop or fn"},
	{"recur in for body", "(loop [i 0]\n  (for [x [1]] (recur x)))", ErrCompile, "2:16", "recur outside loop or fn"},
	{"recur in let binding", "(loop [i 0]\n  (let [x (recur 1)] x))", ErrCompile, "2:11", "recur must be in tail position"},
	{"loop without vector", "(loop i 0)", ErrCompile, "1:1", "loop needs a binding vector"},
	{"loop odd bindings", "(loop [i]\n  i)", ErrCompile, "1:7", "loop binding vector needs name/value pairs"},
	{"nested fn literal", "(map #(+ %\n        #(inc %)) [1])", ErrRead, "2:9", "nested #()s are not allowed"},
	{"case duplicate test", "(case 1\n  1 :a\n  1 :b)", ErrCompile, "3:3", "duplicate case test 1"},
	{"case duplicate in list", "(case 1\n  (1 2) :a\n  (3 2) :b)", ErrCompile, "3:6", "duplicate case test 2"},
	{"if-let two bindings", "(if-let [a 1 b 2]\n  a)", ErrCompile, "1:9", "if-let takes exactly one name and value"},
	{"if-let too many branches", "(if-let [a 1] a b c)", ErrCompile, "1:1", "if-let needs a then form and at most one else form"},
	{"for modifier first", "(for [:when true x [1]]\n  x)", ErrCompile, "1:7", "for must start with a binding"},
	{"for unknown modifier", "(for [x [1] :unless true]\n  x)", ErrCompile, "1:13", "unknown for modifier :unless"},
	{"for two bodies", "(for [x [1]] x x)", ErrCompile, "1:1", "for needs one body form"},
	{"dotimes two names", "(dotimes [i 1 j 2]\n  i)", ErrCompile, "1:10", "dotimes takes one name and a count"},
	{"letfn bad spec", "(letfn [f (fn [] 1)]\n  (f))", ErrCompile, "1:9", "letfn functions are written (name [params] body…)"},
	{"declare in fn", "(defn f []\n  (declare x))", ErrCompile, "2:3", "declare is only allowed at the top level"},
	{"match odd clauses", "(match 1\n  1)", ErrCompile, "2:3", "match needs pattern/result pairs"},
	{"match bad list pattern", "(match 1\n  (a b) 1)", ErrCompile, "2:3", "match list patterns are (p :guard f) or (p1 | p2 …)"},
	{"as-> without name", "(as-> 1 (inc 2))", ErrCompile, "1:1", "as-> needs an expression and a name"},
	{"keys with a number", "(let [{:keys [1]} {}]\n  1)", ErrCompile, "1:15", "names in :keys must be symbols"},
	{"or keyed by keyword", "(let [{:keys [a] :or {:a 1}} {}]\n  a)", ErrCompile, "1:23", ":or keys must be the local names"},
	{"cannot bind loop", "(let [loop 1]\n  loop)", ErrCompile, "1:7", "cannot bind loop: it is a special form"},
	{"set duplicate literal", "#{:a\n  :a}", ErrRead, "2:3", "duplicate set member :a"},
	{"plan with program and body", "(plan :program (do) :body (do))", ErrCompile, "1:1", "plan is not allowed in pure code"},
}

var confModelRuntimeErrors = []confErrCase{
	{"case no match no default", "(let [x 5]\n  (case x 1 :one 2 :two))", ErrValue, "2:3", "case has no clause for 5 and no default"},
	{"condp no match no default", "(condp = 9\n  1 :a)", ErrValue, "1:1", "condp has no clause for 9 and no default"},
	{"match no clause", "(match [1 2]\n  [1] :one)", ErrValue, "1:1", "match found no clause for [1 2]"},
	{"set literal duplicate values", "(let [a 1 b 1]\n  #{a b})", ErrValue, "2:3", "duplicate member 1 in set literal"},
	{"int of NaN", "(int ##NaN)", ErrArith, "1:1", "does not fit in an int64"},
	{"int of string", "(int \"3\")", ErrType, "1:1", "int expects a number"},
	{"subvec out of range", "(subvec [1 2]\n  1 5)", ErrIndex, "1:1", "subvec range 1..5 out of range"},
	{"subvec of list", "(subvec '(1 2) 0)", ErrType, "1:1", "subvec expects a vector"},
	{"disj on vector", "(disj [1 2] 1)", ErrType, "1:1", "disj expects a set or nil"},
	{"dotimes on string", "(dotimes [i \"3\"]\n  i)", ErrType, "1:1", "dotimes expects a number"},
	{"for over number", "(for [x 5]\n  x)", ErrType, "1:1", "for expects a collection"},
	{"error in loop body", "(loop [i 0]\n  (if (< i 3) (recur (inc i)) (/ i 0)))", ErrArith, "2:31", "division by zero"},
	{"error in for body", "(for [x [1 0]]\n  (/ 1 x))", ErrArith, "2:3", "division by zero"},
	{"destructure in loop", "(loop [[a] 5]\n  a)", ErrType, "1:8", "cannot destructure a int"},
	{"set called with two many args", "(#{1} 1 2 3)", ErrArity, "1:1", "set called with 3 arguments"},
}

func TestConformanceModelErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range confModelCompileErrors {
		t.Run("compile/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileString(tc.src, Options{File: "test.rtfs"})
			if err == nil {
				t.Fatalf("%s\ncompiled, want an error", tc.src)
			}
			checkConfErr(t, tc, err)
		})
	}
	for _, tc := range confModelRuntimeErrors {
		t.Run("run/"+tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := CompileString(tc.src, Options{File: "test.rtfs"})
			if err != nil {
				t.Fatalf("%s\ncompile: %v", tc.src, err)
			}
			v, err := p.Eval(context.Background())
			if err == nil {
				t.Fatalf("%s\n= %s, want an error", tc.src, Print(v))
			}
			checkConfErr(t, tc, err)
		})
	}
}

// TestModelFormsAreBounded: fuel and depth limits hold in every new
// form: a loop that never ends, an iteration over a huge range, mutual
// recursion without recur.
func TestModelFormsAreBounded(t *testing.T) {
	t.Parallel()
	fuel := []string{
		`(loop [i 0] (recur (inc i)))`,
		`(loop [] (recur))`,
		`((fn [x] (recur x)) 1)`,
		`(dotimes [i 1000000000] i)`,
		`(doseq [x (range 100000000)] x)`,
		`(count (for [x (range 1000) y (range 1000)] [x y]))`,
		`(for [x (range 100000) :when false] x)`,
		`(letfn [(f [n] (recur (inc n)))] (f 0))`,
		`(loop [s #{}] (recur (conj s (count s))))`,
		`(reduce (fn [s _] (into s (map-indexed vector s))) [1] (range 64))`,
		`(reduce (fn [v _] (mapcat (fn [x] [x x]) v)) [1] (range 64))`,
	}
	for _, src := range fuel {
		_, err := confEval(src, Options{Limits: Limits{Fuel: 100000}})
		var e *Error
		if !errors.As(err, &e) || e.Type != ErrFuel {
			t.Errorf("%s: err = %v, want %s", src, err, ErrFuel)
		}
	}
	depth := []string{
		`(letfn [(f [n] (g n)) (g [n] (inc (f n)))] (f 0))`,
		"(declare g)\n(defn f [n] (inc (g n)))\n(defn g [n] (f n))\n(f 1)",
		`(defn f [n] (loop [i 0] (if (< i 1) (f n) i))) (f 1)`,
	}
	for _, src := range depth {
		_, err := confEval(src, Options{Limits: Limits{MaxDepth: 50}})
		var e *Error
		if !errors.As(err, &e) || e.Type != ErrDepth {
			t.Errorf("%s: err = %v, want %s", src, err, ErrDepth)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := CompileString(`(loop [i 0] (recur (inc i)))`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EvalWith(ctx, Limits{Fuel: 1 << 40}); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("a cancelled loop ended with %v", err)
	}
}

// TestModelFormsCovered: every form and builtin added for the plans
// models write exists and has a conformance case.
func TestModelFormsCovered(t *testing.T) {
	t.Parallel()
	forms := strings.Fields(`loop recur dotimes doseq for if-let when-let if-some when-some letfn declare case condp
		as-> some-> some->> match`)
	builtins := strings.Fields(`int float double map-indexed subvec partition partition-by group-by frequencies keep
		mapcat interpose zipmap update update-in select-keys not-empty println prn log set hash-set disj contains? conj set?`)
	var all strings.Builder
	for _, group := range [][]confCase{confQualifiedKeys, confLoops, confIteration, confBinding, confCaseForms, confFnLiterals, confSets, confModelBuiltins} {
		for _, tc := range group {
			all.WriteString(tc.src)
			all.WriteByte('\n')
		}
	}
	nodes, err := Read(all.String(), "all")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Kind == NodeSymbol {
			used[n.Val.Str()] = true
		}
		for _, it := range n.Items {
			walk(it)
		}
	}
	for _, n := range nodes {
		walk(n)
	}
	for _, name := range forms {
		if !IsSpecialForm(name) {
			t.Errorf("%s is not a special form", name)
		}
		if !used[name] {
			t.Errorf("form %s has no conformance case", name)
		}
	}
	env := NewEnv()
	for _, name := range builtins {
		if env.Lookup(name) == nil {
			t.Errorf("builtin %s is missing", name)
		} else if !used[name] {
			t.Errorf("builtin %s has no conformance case", name)
		}
	}
}

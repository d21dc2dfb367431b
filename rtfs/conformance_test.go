package rtfs

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

// The conformance suite pins the dialect of DESIGN §5: each case is a
// program and the canonical printed form of its value.

type confCase struct {
	name string
	src  string
	want string
}

var confLiterals = []confCase{
	{"int", `42`, `42`},
	{"negative int", `-7`, `-7`},
	{"max int", `9223372036854775807`, `9223372036854775807`},
	{"float", `2.5`, `2.5`},
	{"whole float keeps decimal", `3.0`, `3.0`},
	{"float exponent", `1e3`, `1000.0`},
	{"string escapes", `"a\tb\n\"q\"\\"`, `"a\tb\n\"q\"\\"`},
	{"unicode escape", `"caf\u00e9"`, `"café"`},
	{"keyword", `:a.b`, `:a.b`},
	{"namespaced keyword", `:contract/precondition-failed`, `:contract/precondition-failed`},
	{"nil", `nil`, `nil`},
	{"true", `true`, `true`},
	{"false", `false`, `false`},
	{"vector", `[1 "two" :three 4.0]`, `[1 "two" :three 4.0]`},
	{"commas are whitespace", `[1, 2, 3]`, `[1 2 3]`},
	{"map keys sorted", `{:b 2, :a 1}`, `{:a 1 :b 2}`},
	{"nested collections", `{:v [1 {:z nil}] :s "x"}`, `{:s "x" :v [1 {:z nil}]}`},
	{"discard", `[1 #_2 3 #_ [4 5]]`, `[1 3]`},
	{"comment", "; a comment\n5 ; trailing", `5`},
	{"regex", `#"a+\d"`, `#"a+\d"`},
	{"quoted symbol", `'audit.succeeded?`, `audit.succeeded?`},
	{"quoted list", `'(1 x "s")`, `(1 x "s")`},
	{"empty list", `()`, `()`},
	{"infinity", `##Inf`, `##Inf`},
	{"metadata is dropped", `^:private [1]`, `[1]`},
	{"last form is the value", `1 2 3`, `3`},
	{"empty program", ``, `nil`},
}

var confNumbers = []confCase{
	{"div exact", `(/ 6 2)`, `3`},
	{"div inexact", `(/ 10 4)`, `2.5`},
	{"div float", `(/ 1 2.0)`, `0.5`},
	{"div reciprocal", `(/ 4)`, `0.25`},
	{"add mixed", `(+ 1 2.0)`, `3.0`},
	{"add none", `(+)`, `0`},
	{"mul none", `(*)`, `1`},
	{"negate", `(- 5)`, `-5`},
	{"sub many", `(- 10 1 2 3)`, `4`},
	{"mod negative", `(mod -7 3)`, `2`},
	{"mod negative divisor", `(mod 7 -3)`, `-2`},
	{"inc float", `(inc 1.5)`, `2.5`},
	{"dec", `(dec 0)`, `-1`},
	{"max", `(max 1 5 3)`, `5`},
	{"min", `(min 1 -2 3.5)`, `-2`},
	{"abs", `(abs -3)`, `3`},
	{"pos?", `[(pos? 1) (pos? 0)]`, `[true false]`},
	{"neg?", `(neg? -0.5)`, `true`},
	{"zero?", `[(zero? 0) (zero? 0.0) (zero? 1)]`, `[true true false]`},
	{"even? odd?", `[(even? 4) (odd? 4) (odd? -3)]`, `[true false true]`},
	{"lt chain", `[(< 1 2 3) (< 1 3 2)]`, `[true false]`},
	{"le ge", `[(<= 1 1 2) (>= 3 3 1) (> 3 2.5)]`, `[true true true]`},
	{"int and float differ", `(= 1 1.0)`, `false`},
	{"equal ints", `(= 1 1 1)`, `true`},
	{"list equals vector", `(= [1 2] '(1 2))`, `true`},
	{"maps equal", `(= {:a 1 :b [2]} {:b [2] :a 1})`, `true`},
	{"not=", `(not= 1 2)`, `true`},
	{"not", `[(not nil) (not false) (not 0) (not "")]`, `[true true false false]`},
}

var confSpecialForms = []confCase{
	{"do", `(do 1 2 3)`, `3`},
	{"do empty", `(do)`, `nil`},
	{"let", `(let [x 1 y (+ x 1)] (* x y 10))`, `20`},
	{"let shadowing", `(let [x 1] (let [x 2] x))`, `2`},
	{"let body", `(let [x 1] x (+ x 1))`, `2`},
	{"let scope ends", `(let [f (let [x 5] (fn [] x))] (f))`, `5`},
	{"if zero is true", `(if 0 :a :b)`, `:a`},
	{"if empty string is true", `(if "" :a :b)`, `:a`},
	{"if empty vector is true", `(if [] :a :b)`, `:a`},
	{"if nil", `(if nil :a :b)`, `:b`},
	{"if false no else", `(if false :a)`, `nil`},
	{"when", `(when true 1 2)`, `2`},
	{"when false", `(when false 1)`, `nil`},
	{"when-not", `(when-not false :yes)`, `:yes`},
	{"when-not true", `(when-not 1 :yes)`, `nil`},
	{"cond", `(cond false 1 nil 2 :else 3)`, `3`},
	{"cond first", `(cond (= 1 1) :one :else :other)`, `:one`},
	{"cond none", `(cond false 1)`, `nil`},
	{"fn call", `((fn [x] (* x x)) 4)`, `16`},
	{"fn named recursion", `((fn f [n] (if (= n 0) 1 (* n (f (dec n))))) 5)`, `120`},
	{"fn variadic", `((fn [a & r] r) 1 2 3)`, `[2 3]`},
	{"fn variadic none", `((fn [a & r] r) 1)`, `nil`},
	{"fn closure", `(let [add (fn [n] (fn [x] (+ x n)))] ((add 3) 4))`, `7`},
	{"fn closures are independent", `(let [mk (fn [n] (fn [] n)) a (mk 1) b (mk 2)] [(a) (b)])`, `[1 2]`},
	{"fn prints", `(fn [x] x)`, `#fn[fn]`},
	{"fn no args", `((fn [] :ok))`, `:ok`},
	{"defn", "(defn sq [x] (* x x))\n(sq 5)", `25`},
	{"defn docstring", "(defn sq \"Squares.\" [x] (* x x))\n(sq 6)", `36`},
	{"defn value", `(defn sq [x] (* x x))`, `#fn[sq]`},
	{"defn recursion", "(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))\n(fib 15)", `610`},
	{"defn mutual order", "(defn a [x] (inc x))\n(defn b [x] (a (a x)))\n(b 1)", `3`},
	{"def", "(def x 10)\n(+ x 1)", `11`},
	{"def value", `(def x 1)`, `1`},
	{"def used by defn", "(def base 100)\n(defn f [x] (+ base x))\n(f 1)", `101`},
	{"and empty", `(and)`, `true`},
	{"and value", `(and 1 2)`, `2`},
	{"and falsy", `(and 1 nil 2)`, `nil`},
	{"and short-circuits", `(and false (/ 1 0))`, `false`},
	{"or empty", `(or)`, `nil`},
	{"or value", `(or nil false 3)`, `3`},
	{"or last falsy", `(or nil false)`, `false`},
	{"or short-circuits", `(or 1 (/ 1 0))`, `1`},
	{"quote form", `(quote (a b))`, `(a b)`},
	{"quote map", `'{:a b}`, `{:a b}`},
	{"quote nested quote", `''x`, `'x`},
	{"try no error", `(try 1 (catch e 2))`, `1`},
	{"try catch type", `(try (/ 1 0) (catch e (:type e)))`, `:rtfs/arithmetic-error`},
	{"try catch message", `(try (throw "boom") (catch e (:message e)))`, `"boom"`},
	{"try catch thrown type", `(try (throw "boom") (catch e (:type e)))`, `:rtfs/thrown`},
	{"try throw map", `(try (throw {:type :my/err :message "m"}) (catch e [(:type e) (:message e)]))`, `[:my/err "m"]`},
	{"try throw data", `(try (throw 42) (catch e (:data e)))`, `42`},
	{"try catch position", "(try\n  (nth [] 1)\n  (catch e [(:line e) (:col e)]))", `[2 3]`},
	{"try catch class form", `(try (nth [] 0) (catch Exception e (:type e)))`, `:rtfs/index-error`},
	{"try finally value", `(try 1 (finally 2))`, `1`},
	{"try catch finally", `(try (throw "x") (catch e :caught) (finally :ignored))`, `:caught`},
	{"try error map keys", `(try (throw "x") (catch e (keys e)))`, `[:col :line :message :type]`},
	{"try nested rethrow", `(try (try (/ 1 0) (catch e (throw "again"))) (catch e (:message e)))`, `"again"`},
	{"keyword call", `(:a {:a 1})`, `1`},
	{"keyword call default", `(:b {:a 1} 0)`, `0`},
	{"keyword call nil", `(:a nil)`, `nil`},
	{"map call", `({:a 1} :a)`, `1`},
	{"map call default", `({:a 1} :b :d)`, `:d`},
	{"vector call", `([10 20 30] 1)`, `20`},
	{"keyword as function value", `(map :a [{:a 1} {:a 2} {}])`, `[1 2 nil]`},
	{"map as function value", `(map {:a 1 :b 2} [:b :a])`, `[2 1]`},
}

var confDestructuring = []confCase{
	{"vector pattern", `(let [[a b] [1 2]] (+ a b))`, `3`},
	{"vector pattern rest", `(let [[a & r] [1 2 3]] r)`, `[2 3]`},
	{"vector pattern as", `(let [[a b :as all] [1 2 3]] [a b all])`, `[1 2 [1 2 3]]`},
	{"vector pattern nested", `(let [[a [b c]] [1 [2 3]]] c)`, `3`},
	{"vector pattern short", `(let [[a b c] [1]] [a c])`, `[1 nil]`},
	{"vector pattern list", `(let [[a b] '(1 2)] b)`, `2`},
	{"vector pattern nil", `(let [[a] nil] a)`, `nil`},
	{"map keys", `(let [{:keys [a b]} {:a 1 :b 2}] (+ a b))`, `3`},
	{"map keys or", `(let [{:keys [a] :or {a 9}} {}] a)`, `9`},
	{"map or keeps false", `(let [{:keys [a] :or {a 1}} {:a false}] a)`, `false`},
	{"map strs", `(let [{:strs [s]} {"s" 5}] s)`, `5`},
	{"map explicit key as", `(let [{x :x :as m} {:x 1 :y 2}] [x m])`, `[1 {:x 1 :y 2}]`},
	{"map pattern nil", `(let [{:keys [a]} nil] a)`, `nil`},
	{"map nested", `(let [{{:keys [n]} :inner} {:inner {:n 4}}] n)`, `4`},
	{"fn param map", `((fn [{:keys [n]}] n) {:n 4})`, `4`},
	{"fn param vector", `((fn [[a b]] (* a b)) [3 4])`, `12`},
	{"fn rest destructured", `((fn [a & [b c]] [a b c]) 1 2 3)`, `[1 2 3]`},
	{"defn destructuring", "(defn f [{:keys [x y] :or {y 10}}] (+ x y))\n(f {:x 1})", `11`},
	{"reduce destructuring", `(reduce (fn [acc [k v]] (+ acc v)) 0 {:a 1 :b 2})`, `3`},
}

var confCollections = []confCase{
	{"str empty", `(str)`, `""`},
	{"str strings", `(str "a" "b")`, `"ab"`},
	{"str nil", `(str nil)`, `""`},
	{"str mixed", `(str 1 2.5 :k 'sym true)`, `"12.5:ksymtrue"`},
	{"str whole float", `(str 3.0)`, `"3.0"`},
	{"str vector", `(str [1 "a" nil])`, `"[1 \"a\" nil]"`},
	{"str map canonical", `(str {:b 1 :a 2})`, `"{:a 2 :b 1}"`},
	{"pr-str", `(pr-str "a" 1 nil)`, `"\"a\" 1 nil"`},
	{"count vector", `(count [1 2 3])`, `3`},
	{"count nil", `(count nil)`, `0`},
	{"count map", `(count {:a 1 :b 2})`, `2`},
	{"count string runes", `(count "héllo")`, `5`},
	{"count list", `(count '(1 2))`, `2`},
	{"get map", `(get {:a 1} :a)`, `1`},
	{"get default", `(get {:a 1} :b 5)`, `5`},
	{"get present nil", `(get {:a nil} :a 5)`, `nil`},
	{"get vector", `(get [1 2 3] 0)`, `1`},
	{"get negative index", `(get [1 2 3] -1)`, `nil`},
	{"get past end", `(get [1 2 3] 3)`, `nil`},
	{"get nil", `(get nil :a)`, `nil`},
	{"get string", `(get "abc" 1)`, `"b"`},
	{"get non-int index", `(get [1 2] :a :d)`, `:d`},
	{"get-in", `(get-in {:a {:b [10 20]}} [:a :b 1])`, `20`},
	{"get-in missing default", `(get-in {:a 1} [:x :y] :none)`, `:none`},
	{"get-in empty path", `(get-in {:a 1} [])`, `{:a 1}`},
	{"assoc", `(assoc {:a 1} :b 2)`, `{:a 1 :b 2}`},
	{"assoc replace", `(assoc {:a 1} :a 3)`, `{:a 3}`},
	{"assoc nil", `(assoc nil :a 1)`, `{:a 1}`},
	{"assoc many", `(assoc {} :a 1 :b 2)`, `{:a 1 :b 2}`},
	{"assoc vector", `(assoc [1 2 3] 1 :x)`, `[1 :x 3]`},
	{"assoc vector end", `(assoc [1 2] 2 3)`, `[1 2 3]`},
	{"assoc leaves original", `(let [m {:a 1} n (assoc m :a 2)] [m n])`, `[{:a 1} {:a 2}]`},
	{"assoc-in new", `(assoc-in {} [:a :b] 1)`, `{:a {:b 1}}`},
	{"assoc-in vector", `(assoc-in {:a [1 2]} [:a 0] 9)`, `{:a [9 2]}`},
	{"dissoc", `(dissoc {:a 1 :b 2} :a)`, `{:b 2}`},
	{"dissoc missing", `(dissoc {:a 1} :z)`, `{:a 1}`},
	{"dissoc many", `(dissoc {:a 1 :b 2 :c 3} :a :b)`, `{:c 3}`},
	{"dissoc nil", `(dissoc nil :a)`, `nil`},
	{"merge", `(merge {:a 1} {:b 2} {:a 3})`, `{:a 3 :b 2}`},
	{"merge none", `(merge)`, `nil`},
	{"merge nils", `(merge nil {:a 1} nil)`, `{:a 1}`},
	{"merge nil between maps", `(merge {:a 1} nil {:b 2})`, `{:a 1 :b 2}`},
	{"keys canonical order", `(keys {:b 2 :a 1 :c 3})`, `[:a :b :c]`},
	{"vals canonical order", `(vals {:b 2 :a 1 :c 3})`, `[1 2 3]`},
	{"keys empty", `[(keys {}) (keys nil)]`, `[[] []]`},
	{"contains? map nil value", `(contains? {:a nil} :a)`, `true`},
	{"contains? map missing", `(contains? {:a 1} :b)`, `false`},
	{"contains? vector index", `[(contains? [1 2] 1) (contains? [1 2] 2) (contains? [1 2] -1)]`, `[true false false]`},
	{"contains? nil", `(contains? nil :a)`, `false`},
	{"contains? string", `(contains? "abc" 2)`, `true`},
	{"conj vector", `(conj [1 2] 3)`, `[1 2 3]`},
	{"conj vector many", `(conj [1] 2 3)`, `[1 2 3]`},
	{"conj list prepends", `(conj '(1 2) 0)`, `(0 1 2)`},
	{"conj list many", `(conj '(1) 2 3)`, `(3 2 1)`},
	{"conj map pair", `(conj {:a 1} [:b 2])`, `{:a 1 :b 2}`},
	{"conj map map", `(conj {:a 1} {:b 2 :a 0})`, `{:a 0 :b 2}`},
	{"conj nil", `(conj nil 1)`, `(1)`},
	{"conj nothing", `[(conj) (conj [1])]`, `[[] [1]]`},
	{"into vector", `(into [1] [2 3])`, `[1 2 3]`},
	{"into map", `(into {} [[:a 1] [:b 2]])`, `{:a 1 :b 2}`},
	{"into map from map", `(into {:a 1} {:b 2})`, `{:a 1 :b 2}`},
	{"into list", `(into '() [1 2])`, `(2 1)`},
	{"vector builtin", `[(vector) (vector 1 2)]`, `[[] [1 2]]`},
	{"vector does not keep args", `(let [v (vector 1 2) w (vector 3 4)] [v w])`, `[[1 2] [3 4]]`},
	{"list", `[(list) (list 1 2)]`, `[() (1 2)]`},
	{"hash-map", `(hash-map :b 2 :a 1)`, `{:a 1 :b 2}`},
	{"hash-map empty", `(hash-map)`, `{}`},
	{"hash-map later wins", `(hash-map :a 1 :a 2)`, `{:a 2}`},
	{"vec", `[(vec '(1 2)) (vec nil) (vec {:a 1})]`, `[[1 2] [] [[:a 1]]]`},
	{"zipmap", `(zipmap [:a :b :c] [1 2])`, `{:a 1 :b 2}`},
	{"select-keys", `(select-keys {:a 1 :b 2 :c 3} [:a :c :z])`, `{:a 1 :c 3}`},
	{"update", `(update {:a 1} :a inc)`, `{:a 2}`},
	{"update missing", `(update {:a 1} :b (fn [x] (if (nil? x) 0 x)))`, `{:a 1 :b 0}`},
	{"update extra args", `(update {:a 1} :a + 10 100)`, `{:a 111}`},
	{"update vector", `(update [1 2] 0 inc)`, `[2 2]`},
	{"update-in", `(update-in {:a {:b 1}} [:a :b] inc)`, `{:a {:b 2}}`},
	{"update-in new path", `(update-in {} [:a :n] (fn [x] (if x (inc x) 1)))`, `{:a {:n 1}}`},
	{"empty?", `[(empty? []) (empty? nil) (empty? "") (empty? {}) (empty? '())]`, `[true true true true true]`},
	{"empty? false", `[(empty? [1]) (empty? "a") (empty? {:a 1})]`, `[false false false]`},
	{"not-empty", `[(not-empty []) (not-empty [1])]`, `[nil [1]]`},
	{"big map built linearly", `(count (frequencies (map (fn [x] (mod x 1000)) (range 5000))))`, `1000`},
	{"big map lookup", `(get (zipmap (range 100) (range 100 200)) 50)`, `150`},
}

var confSequences = []confCase{
	{"first", `(first [1 2])`, `1`},
	{"first empty", `[(first []) (first nil)]`, `[nil nil]`},
	{"first list", `(first '(3 4))`, `3`},
	{"first string", `(first "abc")`, `"a"`},
	{"first map", `(first {:b 1 :a 2})`, `[:a 2]`},
	{"second", `[(second [1 2 3]) (second [1])]`, `[2 nil]`},
	{"rest", `(rest [1 2 3])`, `[2 3]`},
	{"rest empty", `[(rest []) (rest nil)]`, `[[] []]`},
	{"rest list is vector", `(rest '(1 2))`, `[2]`},
	{"last", `[(last [1 2 3]) (last []) (last '(1 2))]`, `[3 nil 2]`},
	{"butlast", `(butlast [1 2 3])`, `[1 2]`},
	{"nth", `(nth [1 2 3] 1)`, `2`},
	{"nth default", `(nth [1 2] 5 :d)`, `:d`},
	{"nth list", `(nth '(1 2) 0)`, `1`},
	{"nth string", `(nth "abc" 2)`, `"c"`},
	{"nth nil", `(nth nil 3)`, `nil`},
	{"cons", `(cons 0 [1 2])`, `[0 1 2]`},
	{"cons nil", `(cons 1 nil)`, `[1]`},
	{"cons list is vector", `(cons 0 '(1))`, `[0 1]`},
	{"concat", `(concat [1] '(2 3) nil [4])`, `[1 2 3 4]`},
	{"concat none", `(concat)`, `[]`},
	{"map", `(map inc [1 2 3])`, `[2 3 4]`},
	{"map several", `(map + [1 2 3] [10 20])`, `[11 22]`},
	{"map three", `(map vector [1 2] [:a :b] ["x" "y"])`, `[[1 :a "x"] [2 :b "y"]]`},
	{"map nil", `(map inc nil)`, `[]`},
	{"map list gives vector", `(map inc '(1 2))`, `[2 3]`},
	{"map over map", `(map (fn [[k v]] [v k]) {:b 2 :a 1})`, `[[1 :a] [2 :b]]`},
	{"map over string", `(map upper-case "ab")`, `["A" "B"]`},
	{"map canonical order", `(map first {:b 1 :a 2 :c 3})`, `[:a :b :c]`},
	{"mapv", `(mapv dec [1 2])`, `[0 1]`},
	{"filter", `(filter even? (range 6))`, `[0 2 4]`},
	{"filter nil", `(filter pos? nil)`, `[]`},
	{"filter map entries", `(filter (fn [[k v]] (> v 1)) {:a 1 :b 2})`, `[[:b 2]]`},
	{"filterv", `(filterv odd? [1 2 3])`, `[1 3]`},
	{"remove", `(remove even? [1 2 3 4])`, `[1 3]`},
	{"keep", `(keep (fn [x] (when (even? x) (* x 10))) [1 2 3 4])`, `[20 40]`},
	{"reduce", `(reduce + [1 2 3])`, `6`},
	{"reduce empty", `(reduce + [])`, `0`},
	{"reduce init empty", `(reduce + 5 [])`, `5`},
	{"reduce single", `(reduce + [7])`, `7`},
	{"reduce init", `(reduce + 10 [1 2])`, `13`},
	{"reduce build", `(reduce (fn [a x] (conj a (* x x))) [] [1 2 3])`, `[1 4 9]`},
	{"reduce map", `(reduce (fn [m [k v]] (assoc m v k)) {} {:a 1 :b 2})`, `{1 :a 2 :b}`},
	{"reduce max", `(reduce max [3 9 2])`, `9`},
	{"some", `(some even? [1 3 4 5])`, `true`},
	{"some none", `(some even? [1 3])`, `nil`},
	{"some value", `(some :a [{:b 1} {:a 2}])`, `2`},
	{"every?", `[(every? pos? [1 2]) (every? pos? [1 -2]) (every? pos? [])]`, `[true false true]`},
	{"range", `(range 5)`, `[0 1 2 3 4]`},
	{"range start end", `(range 2 5)`, `[2 3 4]`},
	{"range step", `(range 0 10 3)`, `[0 3 6 9]`},
	{"range negative step", `(range 5 0 -2)`, `[5 3 1]`},
	{"range empty", `[(range 0) (range 3 1) (range -2)]`, `[[] [] []]`},
	{"range float", `(range 0 1 0.25)`, `[0.0 0.25 0.5 0.75]`},
	{"repeat", `(repeat 3 :x)`, `[:x :x :x]`},
	{"sort numbers", `(sort [3 1 2])`, `[1 2 3]`},
	{"sort mixed numbers", `(sort [2.5 1 3])`, `[1 2.5 3]`},
	{"sort strings", `(sort ["b" "a" "c"])`, `["a" "b" "c"]`},
	{"sort keywords", `(sort [:b :a :c])`, `[:a :b :c]`},
	{"sort empty", `[(sort []) (sort nil)]`, `[[] []]`},
	{"sort nil first", `(sort [2 nil 1])`, `[nil 1 2]`},
	{"sort vectors", `(sort [[2 1] [1 2] [1]])`, `[[1] [1 2] [2 1]]`},
	{"sort predicate comparator", `(sort > [1 3 2])`, `[3 2 1]`},
	{"sort numeric comparator", `(sort (fn [a b] (- b a)) [1 3 2])`, `[3 2 1]`},
	{"sort leaves input", `(let [v [3 1 2]] (sort v) v)`, `[3 1 2]`},
	{"sort-by", `(sort-by count ["ccc" "a" "bb"])`, `["a" "bb" "ccc"]`},
	{"sort-by keyword", `(sort-by :n [{:n 2} {:n 1}])`, `[{:n 1} {:n 2}]`},
	{"sort-by stable", `(sort-by first [[1 :b] [0 :x] [1 :a]])`, `[[0 :x] [1 :b] [1 :a]]`},
	{"sort-by comparator", `(sort-by :n > [{:n 1} {:n 2}])`, `[{:n 2} {:n 1}]`},
	{"compare", `[(compare 1 2) (compare "b" "a") (compare :a :a)]`, `[-1 1 0]`},
	{"distinct", `(distinct [1 2 1 3 2])`, `[1 2 3]`},
	{"distinct int and float", `(distinct [1 1.0])`, `[1 1.0]`},
	{"distinct list equals vector", `(distinct [[1] '(1)])`, `[[1]]`},
	{"reverse", `[(reverse [1 2 3]) (reverse nil)]`, `[[3 2 1] []]`},
	{"take", `[(take 2 [1 2 3]) (take 5 [1]) (take -1 [1])]`, `[[1 2] [1] []]`},
	{"drop", `[(drop 1 [1 2 3]) (drop 5 [1]) (drop 0 '(1))]`, `[[2 3] [] [1]]`},
	{"take-while", `(take-while neg? [-2 -1 0 -3])`, `[-2 -1]`},
	{"drop-while", `(drop-while neg? [-2 -1 0 -3])`, `[0 -3]`},
	{"interpose", `(interpose "," ["a" "b" "c"])`, `["a" "," "b" "," "c"]`},
	{"partition", `(partition 2 [1 2 3 4 5])`, `[[1 2] [3 4]]`},
	{"partition step", `(partition 2 1 [1 2 3])`, `[[1 2] [2 3]]`},
	{"frequencies", `(frequencies ["a" "b" "a"])`, `{"a" 2 "b" 1}`},
	{"group-by", `(group-by even? [1 2 3 4])`, `{false [1 3] true [2 4]}`},
	{"seq", `[(seq []) (seq [1]) (seq nil) (seq "ab")]`, `[nil [1] nil ["a" "b"]]`},
	{"apply", `(apply + [1 2 3])`, `6`},
	{"apply leading args", `(apply + 1 2 [3 4])`, `10`},
	{"apply str", `(apply str ["a" "b"])`, `"ab"`},
	{"apply fn", `(apply (fn [a b] (- a b)) [10 3])`, `7`},
	{"identity", `(map identity [1 nil])`, `[1 nil]`},
	{"comp", `((comp str inc) 1)`, `"2"`},
	{"comp none", `((comp) 5)`, `5`},
	{"partial", `((partial + 1 2) 3)`, `6`},
	{"complement", `(filter (complement even?) [1 2 3])`, `[1 3]`},
}

var confStrings = []confCase{
	{"lower-case", `(lower-case "HeLLo")`, `"hello"`},
	{"upper-case", `(upper-case "abc é")`, `"ABC É"`},
	{"trim", `(trim "  hi \n")`, `"hi"`},
	{"triml trimr", `[(triml "  a ") (trimr " a  ")]`, `["a " " a"]`},
	{"blank?", `[(blank? "  ") (blank? nil) (blank? " a")]`, `[true true false]`},
	{"split string", `(split "a,b,c" ",")`, `["a" "b" "c"]`},
	{"split regex", `(split "a1b22c" #"\d+")`, `["a" "b" "c"]`},
	{"split drops trailing empties", `(split "a,b,," ",")`, `["a" "b"]`},
	{"split keeps leading empty", `(split ",a" ",")`, `["" "a"]`},
	{"split empty string", `(split "" ",")`, `[""]`},
	{"split characters", `(split "abc" "")`, `["a" "b" "c"]`},
	{"split limit", `(split "a,b,c" "," 2)`, `["a" "b,c"]`},
	{"split whitespace regex", `(split "  a  b " #"\s+")`, `["" "a" "b"]`},
	{"join", `(join ", " ["a" "b"])`, `"a, b"`},
	{"join no separator", `(join [1 2 3])`, `"123"`},
	{"join empty", `(join "-" [])`, `""`},
	{"join str rules", `(join "," [1 nil :k "s"])`, `"1,,:k,s"`},
	{"starts-with?", `[(starts-with? "hello" "he") (starts-with? "hello" "lo")]`, `[true false]`},
	{"ends-with?", `(ends-with? "hello" "lo")`, `true`},
	{"includes?", `[(includes? "hello" "ell") (includes? "hello" "z")]`, `[true false]`},
	{"re-matches", `(re-matches #"\d+" "123")`, `"123"`},
	{"re-matches partial is nil", `(re-matches #"\d+" "123a")`, `nil`},
	{"re-matches groups", `(re-matches #"(\w+)@(\w+)" "me@host")`, `["me@host" "me" "host"]`},
	{"re-matches alternation", `(re-matches #"a|ab" "ab")`, `"ab"`},
	{"re-matches nil group", `(re-matches #"(a)|(b)" "b")`, `["b" nil "b"]`},
	{"re-find", `(re-find #"\d+" "ab12cd34")`, `"12"`},
	{"re-find none", `(re-find #"x" "abc")`, `nil`},
	{"re-find groups", `(re-find #"(\d)(\d)" "a12")`, `["12" "1" "2"]`},
	{"re-seq", `(re-seq #"\d" "a1b2")`, `["1" "2"]`},
	{"subs", `(subs "hello" 1)`, `"ello"`},
	{"subs range", `(subs "hello" 1 3)`, `"el"`},
	{"subs characters", `(subs "héllo" 1 2)`, `"é"`},
	{"subs to end", `(subs "abc" 3)`, `""`},
	{"parse-int", `[(parse-int "42") (parse-int "-7") (parse-int "+3")]`, `[42 -7 3]`},
	{"parse-int bad", `[(parse-int "4x") (parse-int "") (parse-int "1.5") (parse-int nil)]`, `[nil nil nil nil]`},
	{"parse-int overflow", `(parse-int "99999999999999999999")`, `nil`},
	{"parse-double", `[(parse-double "2.5") (parse-double "3") (parse-double "1e3")]`, `[2.5 3.0 1000.0]`},
	{"parse-double bad", `[(parse-double "abc") (parse-double "inf") (parse-double "")]`, `[nil nil nil]`},
	{"keyword of string", `(keyword "abc")`, `:abc`},
	{"keyword namespaced", `[(keyword "ns/x") (keyword "ns" "n")]`, `[:ns/x :ns/n]`},
	{"keyword of keyword and symbol", `[(keyword :a) (keyword 'sym) (keyword nil)]`, `[:a :sym nil]`},
	{"name", `[(name :a) (name :ns/a) (name "s") (name 'x)]`, `["a" "a" "s" "x"]`},
	{"namespace", `[(namespace :ns/a) (namespace :a)]`, `["ns" nil]`},
}

var confPredicates = []confCase{
	{"string?", `[(string? "a") (string? :a)]`, `[true false]`},
	{"number?", `[(number? 1) (number? 1.5) (number? "1")]`, `[true true false]`},
	{"int?", `[(int? 1) (int? 1.0)]`, `[true false]`},
	{"float?", `[(float? 1.0) (float? 1)]`, `[true false]`},
	{"keyword?", `[(keyword? :a) (keyword? "a")]`, `[true false]`},
	{"symbol?", `[(symbol? 'a) (symbol? :a)]`, `[true false]`},
	{"map?", `[(map? {}) (map? [])]`, `[true false]`},
	{"vector?", `[(vector? []) (vector? '(1))]`, `[true false]`},
	{"list?", `[(list? '(1)) (list? [1])]`, `[true false]`},
	{"seq?", `[(seq? '(1)) (seq? [1])]`, `[true false]`},
	{"coll?", `[(coll? {}) (coll? []) (coll? '()) (coll? "a") (coll? nil)]`, `[true true true false false]`},
	{"nil?", `[(nil? nil) (nil? false)]`, `[true false]`},
	{"some?", `[(some? false) (some? nil)]`, `[true false]`},
	{"fn?", `[(fn? inc) (fn? (fn [] 1)) (fn? :a) (fn? {})]`, `[true true false false]`},
	{"boolean?", `[(boolean? false) (boolean? nil)]`, `[true false]`},
	{"true? false?", `[(true? true) (true? 1) (false? false) (false? nil)]`, `[true false true false]`},
	{"boolean", `[(boolean nil) (boolean false) (boolean 0) (boolean "")]`, `[false false true true]`},
}

var confPrograms = []confCase{
	{"word count", `(frequencies (split (lower-case "The cat the hat") #" "))`, `{"cat" 1 "hat" 1 "the" 2}`},
	{"pipeline", `(reduce + (map (fn [x] (* x x)) (filter odd? (range 10))))`, `165`},
	{"filter records", "(def results [{:ok true :n 1} {:ok false :n 2} {:ok true :n 3}])\n(map :n (filter :ok results))", `[1 3]`},
	{"ctx style merge", `(let [ctx {:iteration 1} r {:status "ok"}] (assoc (merge ctx (if (map? r) r {})) :result r))`,
		`{:iteration 1 :result {:status "ok"} :status "ok"}`},
	{"group and count", `(let [g (group-by :kind [{:kind :a} {:kind :b} {:kind :a}])] (zipmap (keys g) (map count (vals g))))`, `{:a 2 :b 1}`},
	{"recursive sum", "(defn sum [xs] (if (empty? xs) 0 (+ (first xs) (sum (rest xs)))))\n(sum (range 100))", `4950`},
	{"string building", `(join "\n" (map (fn [[k v]] (str (name k) "=" v)) {:b 2 :a 1}))`, `"a=1\nb=2"`},
	{"regex extraction", `(map (fn [s] (second (re-matches #"id-(\d+)" s))) ["id-1" "x" "id-22"])`, `["1" nil "22"]`},
	{"sum of parsed", `(reduce + (keep parse-int (split "1,x,2,3" ",")))`, `6`},
	{"nested update", `(update-in {:runs [{:n 1} {:n 2}]} [:runs 1 :n] * 10)`, `{:runs [{:n 1} {:n 20}]}`},
}

func confEval(src string, opts Options) (Value, error) {
	if opts.File == "" {
		opts.File = "test.rtfs"
	}
	p, err := CompileString(src, opts)
	if err != nil {
		return Nil, err
	}
	return p.Eval(context.Background())
}

func TestConformance(t *testing.T) {
	t.Parallel()
	groups := [][]confCase{confLiterals, confNumbers, confSpecialForms, confDestructuring,
		confCollections, confSequences, confStrings, confPredicates, confPrograms}
	seen := map[string]bool{}
	total := 0
	for _, group := range groups {
		for _, tc := range group {
			if seen[tc.name] {
				t.Fatalf("duplicate case name %q", tc.name)
			}
			seen[tc.name] = true
			total++
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
	if total < 220 {
		t.Errorf("conformance suite has %d cases; keep at least 220", total)
	}
}

// TestCoreBuiltinsCovered checks that every builtin DESIGN §5 names exists
// and appears in some conformance case.
func TestCoreBuiltinsCovered(t *testing.T) {
	t.Parallel()
	names := strings.Fields(`= not= < <= > >= + - * / mod inc dec min max abs pos? neg? zero? even? odd? not
		str count get get-in assoc assoc-in dissoc merge keys vals contains? first rest last nth conj cons concat
		map filter remove reduce some every? range sort sort-by distinct empty? vector hash-map
		string? number? int? float? keyword? map? vector? nil? fn? lower-case upper-case trim split join
		starts-with? ends-with? includes? re-matches re-find subs parse-int parse-double keyword name
		list list? second apply identity update select-keys reverse take drop into boolean true? false? symbol? coll?`)
	var all strings.Builder
	for _, group := range [][]confCase{confLiterals, confNumbers, confSpecialForms, confDestructuring,
		confCollections, confSequences, confStrings, confPredicates, confPrograms} {
		for _, tc := range group {
			all.WriteString(tc.src)
			all.WriteByte('\n')
		}
	}
	forms, err := Read(all.String(), "all")
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
	for _, f := range forms {
		walk(f)
	}
	env := NewEnv()
	for _, name := range names {
		if env.Lookup(name) == nil {
			t.Errorf("builtin %s is missing", name)
		} else if !used[name] {
			t.Errorf("builtin %s has no conformance case", name)
		}
	}
}

type confErrCase struct {
	name string
	src  string
	typ  string // the error's Type
	pos  string // line:col
	msg  string // a fragment of the message
}

var confRuntimeErrors = []confErrCase{
	{"int overflow add", "(+ 9223372036854775807\n   1)", ErrArith, "1:1", "integer overflow"},
	{"int overflow inc", "(do\n  (inc 9223372036854775807))", ErrArith, "2:3", "integer overflow"},
	{"int overflow in reduce", "(reduce *\n        (range 1 100))", ErrArith, "1:1", "integer overflow"},
	{"division by zero", "(let [x 0]\n  (/ 1 x))", ErrArith, "2:3", "division by zero"},
	{"type error in defn body", "(defn f [x]\n  (+ x 1))\n(f \"a\")", ErrType, "2:3", "+ expects a number"},
	{"nth out of range", "(let [v [1 2 3]]\n  (nth v 10))", ErrIndex, "2:3", "nth index 10 out of range"},
	{"error inside map fn", "(do\n  (map (fn [x]\n         (/ x 0))\n       [1 2]))", ErrArith, "3:10", "division by zero"},
	{"error inside reduce fn", "(reduce (fn [acc x]\n          (+ acc (:n x)))\n        0 [{:n 1} {}])", ErrType, "2:11", "+ expects a number"},
	{"throw map with type", "(let [x 1]\n  (when (= x 1)\n    (throw {:type :app/bad :message \"bad\"})))", "app/bad", "3:5", "bad"},
	{"throw string", "(do\n  (throw \"boom\"))", ErrThrown, "2:3", "boom"},
	{"rethrow from catch", "(try (/ 1 0)\n  (catch e\n    (throw (str \"wrapped: \" (:message e)))))", ErrThrown, "3:5", "wrapped: division by zero"},
	{"call a number", "(let [x 5]\n  (x 1))", ErrType, "2:3", "cannot call a int"},
	{"map with a non-function", "(do\n  (map 1 [1 2]))", ErrType, "2:3", "cannot call a int"},
	{"fn arity", "(defn g [a b] a)\n(g 1)", ErrArity, "2:1", "g takes 2 arguments, got 1"},
	{"builtin arity through apply", "(apply inc\n  [1 2])", ErrArity, "1:1", "inc takes 1 argument, got 2"},
	{"keyword call arity", "(do\n  (:a {} 1 2))", ErrArity, "2:3", "keyword :a called with 3 arguments"},
	{"assoc odd arguments", "(do\n  (assoc {} :a 1 :b))", ErrArity, "2:3", "assoc needs key/value pairs"},
	{"hash-map odd arguments", "(do\n  (hash-map :a))", ErrArity, "2:3", "hash-map needs key/value pairs"},
	{"sort incomparable", "(sort\n  [1 \"a\"])", ErrType, "1:1", "sort cannot compare"},
	{"sort maps", "(sort [{:a 1} {:a 2}])", ErrType, "1:1", "sort cannot compare"},
	{"subs out of range", "(let [s \"abc\"]\n  (subs s 2 5))", ErrIndex, "2:3", "subs range 2..5 out of range"},
	{"subs negative", "(subs \"abc\" -1)", ErrIndex, "1:1", "out of range"},
	{"range step zero", "(do\n  (range 0 10 0))", ErrValue, "2:3", "range step must not be zero"},
	{"range non-number", "(range \"a\")", ErrType, "1:1", "range expects a number"},
	{"invalid keyword", "(do\n  (keyword \"a b\"))", ErrValue, "2:3", "not a valid keyword name"},
	{"vector pattern on number", "(let [x 5\n      [a b] x]\n  a)", ErrType, "2:7", "cannot destructure a int"},
	{"assoc on string", "(do\n  (assoc \"abc\" 0 \"x\"))", ErrType, "2:3", "assoc expects a map, a vector or nil"},
	{"assoc vector out of range", "(assoc [1 2]\n  5 :x)", ErrIndex, "1:1", "assoc index 5 out of range"},
	{"count a number", "(do\n  (count 5))", ErrType, "2:3", "count expects a collection"},
	{"first of a number", "(first 5)", ErrType, "1:1", "first expects a collection"},
	{"apply non-collection", "(apply + 1\n  2)", ErrType, "1:1", "apply expects a collection"},
	{"merge non-map", "(merge {:a 1}\n  [1 2])", ErrType, "1:1", "merge expects maps or nil"},
	{"split bad separator", "(split \"a b\" 1)", ErrType, "1:1", "split expects a string or regex separator"},
	{"lower-case non-string", "(do\n  (lower-case :A))", ErrType, "2:3", "lower-case expects a string"},
	{"parse-int non-string", "(parse-int 5)", ErrType, "1:1", "parse-int expects a string"},
	{"re-find bad regex string", "(re-find \"(\" \"x\")", ErrValue, "1:1", "invalid regex"},
	{"partition zero", "(partition 0 [1])", ErrValue, "1:1", "partition size and step must be positive"},
	{"contains? on number", "(contains? 5 1)", ErrType, "1:1", "contains? expects"},
	{"nested position wins", "(defn bad []\n  (get-in {:a 1} [:a :b])\n  (nth [] 0))\n(map (fn [_] (bad)) [1])", ErrIndex, "3:3", "nth index 0"},
}

var confCompileErrors = []confErrCase{
	{"unknown symbol", "(let [x 1]\n  (+ x y))", ErrCompile, "2:8", "unable to resolve symbol y"},
	{"unknown function", "(do\n  (frobnicate 1))", ErrCompile, "2:4", "unable to resolve symbol frobnicate"},
	{"builtin arity too few", "(do\n  (get {:a 1}))", ErrCompile, "2:3", "get takes 2 to 3 arguments, got 1"},
	{"builtin arity too many", "(let [x [1]]\n  (count x x))", ErrCompile, "2:3", "count takes 1 argument, got 2"},
	{"builtin arity none", "(range)", ErrCompile, "1:1", "range takes 1 to 3 arguments, got 0"},
	{"call in pure mode", "(let [x 1]\n  (call :ccos.echo x))", ErrCompile, "2:3", "call is not allowed in pure code"},
	{"step in pure mode", "(do\n  (step \"s\" 1))", ErrCompile, "2:3", "step is not allowed"},
	{"if arity", "(do\n  (if))", ErrCompile, "2:3", "if needs 2 to 3 arguments"},
	{"let odd bindings", "(let [x 1\n      y]\n  x)", ErrCompile, "1:6", "let binding vector needs name/value pairs"},
	{"def inside fn", "(defn f []\n  (def x 1))", ErrCompile, "2:3", "def is only allowed at the top level"},
	{"special form as value", "(map if\n  [1])", ErrCompile, "1:6", "if is a special form"},
	{"cond odd", "(cond\n  true)", ErrCompile, "1:1", "cond needs test/expression pairs"},
	{"fn without params", "(fn x)", ErrCompile, "1:1", "fn needs a parameter vector"},
	{"clojure condition map", "(defn f [x]\n  {:pre [(pos? x)]}\n  x)", ErrCompile, "2:3", "put ^{:pre (fn [args…] test)} on the parameter vector"},
	{"int literal overflow", "(+ 1\n   99999999999999999999)", ErrRead, "2:4", "overflows int64"},
	{"unclosed list", "(+ 1\n  (* 2 3)", ErrRead, "1:1", "never closed"},
}

func checkConfErr(t *testing.T, tc confErrCase, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s\nwant an *Error, got %T %v", tc.src, err, err)
	}
	if e.Type != tc.typ {
		t.Errorf("%s\ntype %s, want %s (%v)", tc.src, e.Type, tc.typ, e)
	}
	prefix := "test.rtfs:" + tc.pos + ": "
	if got := e.Error(); !strings.HasPrefix(got, prefix) || !strings.Contains(got, tc.msg) {
		t.Errorf("%s\n got %q\nwant prefix %q containing %q", tc.src, got, prefix, tc.msg)
	}
}

func TestConformanceRuntimeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range confRuntimeErrors {
		t.Run(tc.name, func(t *testing.T) {
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

func TestConformanceCompileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range confCompileErrors {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileString(tc.src, Options{File: "test.rtfs"})
			if err == nil {
				t.Fatalf("%s\ncompiled, want an error", tc.src)
			}
			checkConfErr(t, tc, err)
		})
	}
}

// TestFuelBoundsBuiltins checks that builtins charge for what they build,
// so a program that asks for huge output stops cleanly and quickly.
func TestFuelBoundsBuiltins(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src string }{
		{"huge range", `(range 100000000)`},
		{"huge float range", `(range 0 1e12 0.5)`},
		{"string doubling", `(reduce (fn [s _] (str s s)) "ab" (range 64))`},
		{"printing shared structure", `(str (reduce (fn [v _] [v v]) 0 (range 64)))`},
		{"pr-str shared structure", `(pr-str (reduce (fn [v _] {:l v :r v}) 0 (range 64)))`},
		{"join doubling", `(reduce (fn [s _] (join [s s])) "ab" (range 64))`},
		{"repeat", `(repeat 1000000000 :x)`},
		{"vector doubling", `(reduce (fn [v _] (into v v)) [1] (range 64))`},
		{"concat doubling", `(reduce (fn [v _] (concat v v)) [1] (range 64))`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := confEval(tc.src, Options{Limits: Limits{Fuel: 100000}})
			var e *Error
			if !errors.As(err, &e) || e.Type != ErrFuel {
				t.Fatalf("%s: err = %v, want %s", tc.src, err, ErrFuel)
			}
			if !strings.HasPrefix(e.Error(), "test.rtfs:1:") {
				t.Errorf("fuel error has no position: %v", e)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src string }{
		{"direct recursion", "(defn f [n]\n  (+ 1 (f n)))\n(f 1)"},
		{"recursion through map", "(defn g [x]\n  (first (map g [x])))\n(g 1)"},
		{"recursion through apply", "(defn h [x]\n  (apply h [x]))\n(h 1)"},
		{"catch cannot stop it", "(defn f [n] (+ 1 (f n)))\n(try (f 1) (catch e :caught))"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := confEval(tc.src, Options{Limits: Limits{MaxDepth: 100}})
			var e *Error
			if !errors.As(err, &e) || e.Type != ErrDepth {
				t.Fatalf("%s: err = %v, want %s", tc.src, err, ErrDepth)
			}
		})
	}
}

// TestBuiltinsNeverPanic calls every core builtin with every combination of
// awkward arguments at its smallest arities: each call must return a value
// or an *Error, never panic.
func TestBuiltinsNeverPanic(t *testing.T) {
	t.Parallel()
	fnv, err := confEval(`(fn [& xs] (first xs))`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	vals := []Value{Nil, True, Int(0), Int(-1), Int(3), Int(math.MaxInt64), Int(math.MinInt64),
		Float(0.5), Float(math.NaN()), String(""), String("héllo, wörld"), String("\xff"), Keyword("k"),
		Keyword("ns/k"), Symbol("s"), Vector([]Value{Int(2), Int(1)}), List([]Value{String("a")}),
		Vector(nil), MapValue(NewMap(Keyword("a"), Int(1))), MapValue(emptyMap), fnv, coreBuiltins["inc"].value(),
		Regex(regexp.MustCompile(`(o)|(x)`))}
	for name, b := range coreBuiltins {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			hi := b.Min + 2
			if b.Max >= 0 {
				hi = min(hi, b.Max)
			}
			for n := b.Min; n <= hi; n++ {
				args := make([]Value, n)
				var rec func(i int)
				rec = func(i int) {
					if i == n {
						_, err := CallFn(context.Background(), b.value(), args, Limits{Fuel: 5000, MaxDepth: 20})
						var e *Error
						if err != nil && !errors.As(err, &e) {
							t.Errorf("%s %s: error %T is not an *Error", name, Print(Vector(args)), err)
						}
						return
					}
					for _, v := range vals {
						if n > 2 && i < n-2 && v.k != KindInt && v.k != KindNil { // keep the product small
							continue
						}
						args[i] = v
						rec(i + 1)
					}
				}
				rec(0)
			}
		})
	}
}

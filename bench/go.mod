module github.com/ralphloop/ralph/bench

go 1.26.0

require github.com/ralphloop/ralph v0.0.0

require github.com/expr-lang/expr v1.17.8

replace github.com/ralphloop/ralph => ../

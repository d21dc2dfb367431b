module github.com/ralphloop/ralph

go 1.26

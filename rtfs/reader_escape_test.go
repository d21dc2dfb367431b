package rtfs

import "testing"

func TestReadUnicodeEscapes(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want, wantErr string }{
		{src: `"a\ud83d\ude00b"`, want: "a😀b"},
		{src: `"\u00e9\xff"`, want: "é\xff"},
		{src: `"\ud800"`, wantErr: `<expr>:1:2: lone surrogate \ud800 in string; pair a \uD800–\uDBFF escape with a \uDC00–\uDFFF one, as in \ud83d\ude00`},
		{src: `"ok \udc00"`, wantErr: `<expr>:1:5: lone surrogate \udc00 in string; pair a \uD800–\uDBFF escape with a \uDC00–\uDFFF one, as in \ud83d\ude00`},
		{src: "\n \"\\ud83d\\u0041\"", wantErr: `<expr>:2:3: lone surrogate \ud83d in string; pair a \uD800–\uDBFF escape with a \uDC00–\uDFFF one, as in \ud83d\ude00`},
		{src: `"\ud83d"`, wantErr: `<expr>:1:2: lone surrogate \ud83d in string; pair a \uD800–\uDBFF escape with a \uDC00–\uDFFF one, as in \ud83d\ude00`},
	}
	for _, tc := range cases {
		forms, err := Read(tc.src, "<expr>")
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: error %v, want %s", tc.src, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case forms[0].Val.Str() != tc.want:
			t.Errorf("%s read as %q, want %q", tc.src, forms[0].Val.Str(), tc.want)
		}
	}
}

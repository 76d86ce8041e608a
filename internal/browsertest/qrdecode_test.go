package browsertest_test

import (
	"bytes"
	"image"
	_ "image/png"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

// decodeQR reads the QR code in a PNG (a screenshot or the served image)
// with an independent decoder (gozxing, a port of ZXing).
func decodeQR(t testing.TB, png []byte) string {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(png))
	if err != nil {
		t.Fatalf("decode PNG: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatalf("binarize: %v", err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_TRY_HARDER: true})
	if err != nil {
		t.Fatalf("no QR code read from the %dx%d image: %v", img.Bounds().Dx(), img.Bounds().Dy(), err)
	}
	return res.GetText()
}

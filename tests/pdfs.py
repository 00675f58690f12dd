"""Real PDFs for tests, made with PDFium itself: each line is a real text object."""

from __future__ import annotations

import ctypes
import io

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c


def make_pdf(pages: list[list[str]]) -> bytes:
    """A PDF with one page per entry, each line drawn as a real text object."""
    doc = pdfium.PdfDocument.new()
    try:
        for lines in pages:
            page = doc.new_page(612, 792)
            y = 720
            for line in lines:
                obj = pdfium_c.FPDFPageObj_NewTextObj(doc.raw, b"Helvetica", ctypes.c_float(12))
                buf = ctypes.create_string_buffer((line + "\x00").encode("utf-16-le"))
                pdfium_c.FPDFText_SetText(
                    obj, ctypes.cast(buf, ctypes.POINTER(pdfium_c.FPDF_WCHAR))
                )
                pdfium_c.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 72, y)
                pdfium_c.FPDFPage_InsertObject(page.raw, obj)
                y -= 18
            pdfium_c.FPDFPage_GenerateContent(page.raw)
            page.close()
        out = io.BytesIO()
        doc.save(out)
        return out.getvalue()
    finally:
        doc.close()

"""Yomiage engine: Japanese text to speech with Style-Bert-VITS2 JP-Extra voices on onnxruntime.

Importable without Home Assistant (installed as ``yomiage_engine`` for the CLI and the Wyoming
server). Modules are imported by name (``engine.engine``, ``engine.text``) so that importing this
package stays cheap.
"""

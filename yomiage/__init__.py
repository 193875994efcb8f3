"""The ``yomiage`` command and the Wyoming server: the engine (``yomiage_engine``) outside Home
Assistant. Installed with the project (``pip install .``, the add-on's image); HACS ships only
``custom_components/yomiage``, which never imports this package.
"""

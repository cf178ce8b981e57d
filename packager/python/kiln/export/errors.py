"""The one exception the exporters raise: the message says what is wrong and where."""


class ExportError(Exception):
    pass

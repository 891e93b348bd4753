"""The words Django REST framework and knox answer API clients with, for our catalog.

DRF ships no Hebrew (its he_IL catalog is empty), so the ones our API can answer with are
listed here for makemessages and translated in locale/he; a string translated in the
project's catalog is used for DRF's own gettext calls too. Nothing imports this module.
"""

from django.utils.translation import gettext_noop, ngettext_lazy

MESSAGES = [
    # rest_framework.exceptions, authentication and permissions; knox
    gettext_noop("Authentication credentials were not provided."),
    gettext_noop("Incorrect authentication credentials."),
    gettext_noop("Invalid token."),
    gettext_noop("Invalid token header. No credentials provided."),
    gettext_noop("Invalid token header. Token string should not contain spaces."),
    gettext_noop("Invalid token header. Token string should not contain invalid characters."),
    gettext_noop("User inactive or deleted."),
    gettext_noop("You do not have permission to perform this action."),
    gettext_noop("Not found."),
    gettext_noop('Method "{method}" not allowed.'),
    gettext_noop("Could not satisfy the request Accept header."),
    gettext_noop('Unsupported media type "{media_type}" in request.'),
    gettext_noop("Malformed request."),
    gettext_noop("Invalid input."),
    gettext_noop("A server error occurred."),
    gettext_noop("Request was throttled."),
    ngettext_lazy("Expected available in {wait} second.", "Expected available in {wait} seconds."),
    # rest_framework.fields, relations, serializers and pagination
    gettext_noop("This field is required."),
    gettext_noop("This field may not be null."),
    gettext_noop("This field may not be blank."),
    gettext_noop("Not a valid string."),
    gettext_noop("A valid integer is required."),
    gettext_noop("A valid number is required."),
    gettext_noop("Must be a valid boolean."),
    gettext_noop("String value too large."),
    gettext_noop("Ensure this field has no more than {max_length} characters."),
    gettext_noop("Ensure this field has at least {min_length} characters."),
    gettext_noop("Ensure this value is less than or equal to {max_value}."),
    gettext_noop("Ensure this value is greater than or equal to {min_value}."),
    gettext_noop('"{input}" is not a valid choice.'),
    gettext_noop('Invalid pk "{pk_value}" - object does not exist.'),
    gettext_noop("Incorrect type. Expected pk value, received {data_type}."),
    gettext_noop("Invalid data. Expected a dictionary, but got {datatype}."),
    gettext_noop('Expected a list of items but got type "{input_type}".'),
    gettext_noop("Datetime has wrong format. Use one of these formats instead: {format}."),
    gettext_noop("Invalid page."),
    gettext_noop("Invalid cursor"),
]

"""Manifests the tests apply: a user CRD (widgets.example.com) and objects
of it, written as YAML exactly as a user would.

Owns the user kind the kubectl and bad-input tests share (a CRD that is not
Racksmith's, with printer columns, a selectable field, defaults and
validation).
"""

from __future__ import annotations

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    kind: Widget
    plural: widgets
    singular: widget
    shortNames: [wdg]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    selectableFields:
    - jsonPath: .spec.color
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Phase
      type: string
      jsonPath: .status.phase
    - name: Owner
      type: string
      jsonPath: .spec.owner
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a thing the tests make.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [color]
            properties:
              color:
                type: string
                description: The colour of the widget.
                enum: [red, green, blue]
              size:
                type: integer
                description: How big, from 1 to 10.
                minimum: 1
                maximum: 10
                default: 3
              owner:
                type: string
                description: Who owns it.
                pattern: '^[a-z]+$'
          status:
            type: object
            properties:
              phase:
                type: string
"""


def widget(name: str, color: str = "red", size: int = 3, namespace: str = "default",
           extra: str = "") -> str:
    return f"""\
apiVersion: example.com/v1
kind: Widget
metadata:
  name: {name}
  namespace: {namespace}
spec:
  color: {color}
  size: {size}
  owner: alice
{extra}"""
